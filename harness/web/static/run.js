// One run: its figures, the trajectory step by step (loaded a page at a time as you scroll, followed
// live while the run goes on), the patch (unified or side by side), the test output and result.json.
// A tool call links to its result and back.
"use strict";

import {cls, count, el, getJSON, link, money, q, seconds, setStatus} from "./dom.js";

const PAGE = 200;

export function runView(main, params) {
  const ref = params.get("ref") || "";
  const head = el("div", {id: "run-head"});
  const tabs = el("div", {class: "tabs"});
  const panes = {};
  // the steps: a head segment loaded from step 0 as you scroll, then (after "last steps") a tail
  // segment ending at the last step, with the gap between them filled page by page
  const steps = el("div", {id: "steps"});
  const headPart = el("div", {id: "steps-head"});
  const tailPart = el("div", {id: "steps-tail"});
  const more = el("button", {id: "steps-more", class: "more", hidden: true, text: "load more steps"});
  const toEnd = el("button", {id: "steps-end", class: "more", hidden: true, text: "jump to the last steps"});
  const sentinel = el("div", {class: "sentinel"});
  const cuts = el("div", {id: "steps-cut", class: "cut-notes"});
  steps.append(cuts, headPart, el("div", {class: "gap"}, more, sentinel), tailPart);
  // the jump sits above the steps, where appending steps never moves it
  panes.trajectory = el("section", {id: "pane-trajectory"}, el("div", {class: "tabs"}, toEnd), steps);
  panes.patch = el("section", {id: "pane-patch", hidden: true});
  panes.tests = el("section", {id: "pane-tests", hidden: true});
  panes.result = el("section", {id: "pane-result", hidden: true});
  panes.calls = el("section", {id: "pane-calls", hidden: true});
  panes.log = el("section", {id: "pane-log", hidden: true});
  const titles = {result: "result.json", calls: "model calls", log: "agent log"};
  for (const name of ["trajectory", "patch", "tests", "result", "calls", "log"]) {
    tabs.appendChild(el("button", {class: "tab", "data-tab": name, text: titles[name] || name,
                                   hidden: name === "calls" || name === "log", onclick: () => show(name)}));
  }
  let callsShown = false;
  main.append(head, tabs, ...Object.values(panes));

  function show(name) {
    for (const [n, pane] of Object.entries(panes)) pane.hidden = n !== name;
    for (const b of tabs.children) b.classList.toggle("current", b.dataset.tab === name);
    if (name === "calls" && !callsShown) {      // read when first asked for: a long run's calls.jsonl is large
      callsShown = true;
      getJSON("/api/calls?" + q({ref})).then(data => renderCalls(panes.calls, data))
        .catch(err => panes.calls.replaceChildren(el("p", {class: "error-line", text: String(err.message || err)})));
    }
  }
  show("trajectory");

  // loaded: steps 0..loaded-1 are in the head; tailStart..tailEnd-1 in the tail (tailStart null: no tail)
  let loaded = 0, tailStart = null, tailEnd = 0, total = 0, live = false, busy = false, info = null, stopped = false;

  async function loadInfo() {
    info = await getJSON("/api/run?" + q({ref}));
    renderHead(head, info, ref);
    renderPatch(panes.patch, info.patch);
    renderText(panes.tests, info.tests, "No test output in this folder.", "tests-output");
    renderText(panes.log, info.agent_log, "No agent.log in this folder.", "agent-log");
    tabs.querySelector('[data-tab="calls"]').hidden = !info.calls;     // a third-party agent's run only
    tabs.querySelector('[data-tab="log"]').hidden = !info.agent_log;
    panes.result.replaceChildren(info.result
      ? el("pre", {class: "json", id: "result-json", text: JSON.stringify(info.result, null, 2)})
      : info.summary.damaged ? el("p", {class: "error-line damaged-why", text: info.summary.damaged})
      : el("p", {class: "empty", text: "No result.json yet: the run has not finished (or was stopped)."}));
  }

  async function fetchSteps(start, limit) {
    const data = await getJSON("/api/steps?" + q({ref, start, limit}));
    total = data.total;
    cuts.replaceChildren(...(data.cut || []).map(c => el("p", {class: "error-line cut", text: "not shown: " + c})));
    const wasLive = live;
    live = data.live;
    const fragment = document.createDocumentFragment();
    for (const step of data.steps) fragment.appendChild(stepCard(step, ref));
    return {fragment, count: data.steps.length, ended: wasLive && !live};
  }

  function showCounts() {
    const shown = loaded + (tailStart === null ? 0 : tailEnd - tailStart);
    const gap = (tailStart === null ? total : tailStart) - loaded;
    more.hidden = gap <= 0;
    toEnd.hidden = tailStart !== null || total - loaded <= PAGE;
    more.textContent = "load more steps (" + shown + " of " + total + " shown; " + gap + " not loaded here)";
    if (tailStart !== null && loaded >= tailStart) {          // the gap is filled: one segment again
      headPart.append(...tailPart.childNodes);
      loaded = tailEnd;
      tailStart = null;
    }
    if (total === 0 && !live && !headPart.children.length) {
      headPart.appendChild(el("p", {class: "empty", id: "no-steps",
                                    text: "No trajectory in this folder (graded predictions have no agent session)."}));
    }
    setStatus((live ? "live · following the run · " : "") + shown + " of " + total + " steps shown · updated " +
              new Date().toLocaleTimeString(), false);
  }

  // one request at a time, in the order asked (a click while a page is loading waits, never drops)
  let chain = Promise.resolve();
  function guarded(work) {
    chain = chain.then(async () => {
      if (stopped) return;
      busy = true;
      try {
        const ended = await work();
        showCounts();
        if (ended) await loadInfo();
      } catch (err) {
        setStatus(String(err.message || err), true);
      } finally {
        busy = false;
      }
    });
    return chain;
  }

  // the next page of the head (up to the tail, if there is one); again while the gap is still on screen
  // (the observer only says when the gap comes into view, not that it stayed there)
  const gapEnd = () => (tailStart === null ? total : tailStart);
  function nearGap() {
    const box = sentinel.getBoundingClientRect();
    return !panes.trajectory.hidden && box.top < window.innerHeight + 800 && box.bottom > -800;
  }
  const loadSteps = () => guarded(async () => {
    const limit = total === 0 ? PAGE : Math.min(PAGE, gapEnd() - loaded);   // total 0: not asked yet
    if (limit <= 0) return false;
    const got = await fetchSteps(loaded, limit);
    headPart.appendChild(got.fragment);
    loaded += got.count;
    if (got.count && loaded < gapEnd()) setTimeout(() => { if (nearGap()) loadSteps(); }, 50);
    return got.ended;
  });

  // new steps of a live run, at the end of whichever segment ends at the last step
  const follow = () => guarded(async () => {
    const start = tailStart === null ? loaded : tailEnd;
    const got = await fetchSteps(start, PAGE);
    (tailStart === null ? headPart : tailPart).appendChild(got.fragment);
    if (tailStart === null) loaded += got.count; else tailEnd += got.count;
    return got.ended;
  });

  toEnd.addEventListener("click", () => guarded(async () => {
    tailStart = Math.max(loaded, total - PAGE);
    const got = await fetchSteps(tailStart, PAGE);
    tailPart.replaceChildren(got.fragment);
    tailEnd = tailStart + got.count;
    setTimeout(() => tailPart.lastElementChild && tailPart.lastElementChild.scrollIntoView({block: "end"}), 0);
    return got.ended;
  }));

  more.addEventListener("click", loadSteps);
  const observer = new IntersectionObserver(entries => {
    if (entries.some(e => e.isIntersecting) && loaded < gapEnd()) loadSteps();
  }, {rootMargin: "800px"});
  observer.observe(sentinel);

  steps.addEventListener("click", async event => {
    const target = event.target.closest("[data-goto]");
    if (!target) return;
    event.preventDefault();
    const id = target.dataset.goto;
    for (let tries = 0; !document.getElementById(id) && loaded < (tailStart ?? total) && tries < 50; tries++) {
      await loadSteps();
    }
    const node = document.getElementById(id);
    if (node) {
      if (node.tagName === "DETAILS") node.open = true;
      node.scrollIntoView({block: "center"});
      node.classList.add("flash");
      setTimeout(() => node.classList.remove("flash"), 1500);
    }
  });

  (async () => {
    try {
      await loadInfo();
    } catch (err) {
      head.replaceChildren(el("p", {class: "error-line", text: String(err.message || err)}));
      setStatus(String(err.message || err), true);
      return;
    }
    await loadSteps();
  })();
  const timer = setInterval(() => { if (live && !busy) follow(); }, 1000);
  return () => { stopped = true; clearInterval(timer); observer.disconnect(); };
}

function renderHead(head, info, ref) {
  const s = info.summary;
  const agent = s.agent || (info.result ? "the harness's own loop" : "-");
  const facts = [["task", s.task], ["agent", agent], ["model", s.model], ["stop reason", s.stop_reason],
                 ["tests", s.tests_passed === true ? "passed" : s.tests_passed === false ? "failed" : "-"],
                 ["turns", count(s.turns)],
                 ["tokens in/out", s.tokens ? count(s.tokens.input) + " / " + count(s.tokens.output) : "-"],
                 ["cached input read", s.tokens && s.tokens.cache_read ? count(s.tokens.cache_read) : "-"],
                 ["cost", money(s.cost_usd)], ["time", seconds(s.seconds)], ["state", s.state]];
  if (s.status) facts.unshift(["instance status", s.status]);
  const links = [];
  if (info.evaluation) links.push(link("#/eval?" + q({ref: info.evaluation}), "↑ its evaluation"));
  for (const a of info.attempts) links.push(link("#/run?" + q({ref: a}), a.split("/").pop()));
  head.replaceChildren(...[
    el("h1", {}, "Run ", el("span", {class: "mono", text: s.name})),
    el("dl", {class: "facts"}, ...facts.map(([k, v]) => el("div", {}, el("dt", {text: k}),
                                                           el("dd", {"data-fact": k, text: v ?? "-"})))),
    links.length ? el("p", {class: "links"}, ...links.flatMap(a => [a, " "])) : null,
    s.damaged ? el("pre", {class: "error-box damaged-why", id: "run-damaged", text: "damaged: " + s.damaged}) : null,
    info.error ? el("pre", {class: "error-box", text: info.error.text}) : null,
    info.patch_apply ? el("details", {}, el("summary", {text: "patch_apply.txt"}),
                                     el("pre", {text: info.patch_apply.text})) : null].filter(Boolean));
}

function foldedText(block, ref, line, cls) {
  if (block.text !== undefined) return el("pre", {class: cls, text: block.text});
  const omitted = block.omitted_lines !== undefined ? block.omitted_lines + " lines" : block.omitted_chars + " characters";
  const box = el("div", {class: "folded"});
  const button = el("button", {class: "unfold", text: "… " + omitted + " folded (" + count(block.chars) +
                                                    " characters in all): show everything"});
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const whole = await getJSON("/api/block?" + q({ref, line, block: block.block}));
      box.replaceChildren(el("pre", {class: cls, text: whole.text}),
                          whole.cut ? el("p", {class: "hint", text: "cut at 4,000,000 characters"}) : null);
    } catch (err) {
      button.textContent = String(err.message || err);
    }
  });
  box.append(el("pre", {class: cls, text: block.head}), button, el("pre", {class: cls, text: block.tail}));
  return box;
}

function stepCard(step, ref) {
  const meta = step.meta || {};
  const title = ["step " + (step.index + 1), step.role];
  if (meta.turn !== undefined) title.push("turn " + meta.turn);
  if (meta.usage) title.push(count(meta.usage.input_tokens) + " in / " + count(meta.usage.output_tokens) + " out");
  if (meta.stop_reason) title.push(meta.stop_reason);
  const card = el("article", {class: "step " + cls("role-", "role", step.role_class), id: "step-" + step.index, "data-index": String(step.index)},
                  el("div", {class: "step-title", text: title.join(" · ")}));
  if (!step.blocks.length) {
    card.appendChild(el("p", {class: "empty", text: step.role === "assistant" ? "(an empty reply: no text, no tool call)"
                                                                            : "(no content)"}));
  }
  for (const block of step.blocks) {
    if (block.type === "text") {
      card.appendChild(foldedText(block, ref, step.index, "text"));
    } else if (block.type === "tool_use") {
      card.appendChild(el("details", {class: "call", id: "call-" + block.id, open: true},
        el("summary", {}, el("span", {class: "tool-name", text: "→ " + block.name}),
           el("span", {class: "call-id", text: " " + block.id + " "}),
           el("a", {href: "", class: "goto", "data-goto": "result-" + block.id, text: "result ↓"})),
        foldedText(block.input, ref, step.index, "args")));
    } else if (block.type === "tool_result") {
      card.appendChild(resultBlock(block, ref, step.index));
    }
  }
  return card;
}

function resultBlock(block, ref, line) {
  const facts = [];
  const d = block.details;
  if (d && d.exit_code !== undefined) facts.push("exit " + d.exit_code + (d.timed_out ? " (timed out)" : ""));
  if (block.seconds !== undefined && block.seconds !== null) facts.push(seconds(block.seconds));
  if (d && d.stdout) facts.push("stdout " + count(d.stdout.bytes) + " B / " + count(d.stdout.lines) + " lines" +
                                (d.stdout.truncated ? " (cut)" : ""));
  if (d && d.stderr && d.stderr.bytes) facts.push("stderr " + count(d.stderr.bytes) + " B");
  facts.push(count(block.lines) + " lines, " + count(block.chars) + " chars shown to the model");
  if (block.is_error) facts.push("error" + (block.error_kind ? ": " + block.error_kind : ""));
  const short = block.text !== undefined && block.lines <= 25;
  return el("details", {class: "result" + (block.is_error ? " is-error" : ""), id: "result-" + block.tool_use_id,
                        open: short},
    el("summary", {}, el("span", {class: "tool-name", text: "← " + (block.name || "result")}),
       el("span", {class: "result-facts", text: " " + facts.join(" · ") + " "}),
       el("a", {href: "", class: "goto", "data-goto": "call-" + block.tool_use_id, text: "call ↑"})),
    foldedText(block, ref, line, "output"));
}

function renderText(pane, file, empty, id) {
  if (!file) { pane.replaceChildren(el("p", {class: "empty", text: empty})); return; }
  if (file.refused) { pane.replaceChildren(el("p", {class: "error-line refused", text: file.refused})); return; }
  pane.replaceChildren(el("p", {class: "hint", text: count(file.bytes) + " bytes" +
                                                   (file.cut ? "; the first 4 MB are shown" : "")}),
                       el("pre", {class: "output", id, text: file.text}));
}

// ---------------------------------------------------------------- a third-party agent's model calls

function renderCalls(pane, data) {
  if (!data) { pane.replaceChildren(el("p", {class: "empty", text: "No calls.jsonl in this folder."})); return; }
  if (data.refused) { pane.replaceChildren(el("p", {class: "error-line refused", text: data.refused})); return; }
  const t = data.totals;
  const tokens = c => c ? count(c.input_tokens) + " / " + count(c.output_tokens) +
                          (c.cache_read_tokens ? " (" + count(c.cache_read_tokens) + " cached)" : "") : "-";
  const summary = t.requests + " requests to the model gateway: " + t.answered + " model calls answered, " +
                  t.refused + " refused; tokens in/out " + tokens(t.tokens) + "; cost " + money(t.cost_usd);
  const rows = data.calls.map(c => c.damaged
    ? el("tr", {class: "outcome-other"}, el("td", {text: String(c.n)}), el("td", {colspan: "7", class: "error-cell",
                                                                               text: c.damaged}))
    : el("tr", {class: cls("outcome-", "outcome", c.outcome_class), "data-n": String(c.n)},
         el("td", {text: String(c.n)}), el("td", {text: c.time || "-"}),
         el("td", {class: "mono", text: (c.method || "") + " " + (c.route || "")}),
         el("td", {text: String(c.status ?? "-") + " " + (c.outcome || "")}),
         el("td", {text: tokens(c.tokens)}), el("td", {text: c.tokens ? money(c.cost_usd) : "-"}),
         el("td", {text: seconds(c.seconds)}),
         el("td", {class: "reply", text: c.error || c.reply || "-"})));
  pane.replaceChildren(
    el("p", {class: "hint", id: "calls-totals", text: summary}),
    ...data.cut.map(c => el("p", {class: "error-line cut", text: "not shown: " + c})),
    el("table", {id: "calls-table", class: "list"},
       el("thead", {}, el("tr", {}, ...["#", "time", "request", "status", "tokens in/out", "cost", "time in model",
                                        "answer or error"].map(h => el("th", {text: h})))),
       el("tbody", {}, ...rows)));
}

// ---------------------------------------------------------------- the patch

function renderPatch(pane, file) {
  if (file && file.refused) {
    pane.replaceChildren(el("p", {class: "error-line refused", text: file.refused}));
    return;
  }
  if (!file || !file.text.trim()) {
    pane.replaceChildren(el("p", {class: "empty", text: "No patch: the run changed no file."}));
    return;
  }
  const body = el("div", {id: "diff"});
  const unified = el("button", {class: "tab", "data-mode": "unified", text: "unified"});
  const split = el("button", {class: "tab", "data-mode": "split", text: "side by side"});
  function mode(name) {
    unified.classList.toggle("current", name === "unified");
    split.classList.toggle("current", name === "split");
    body.replaceChildren(name === "unified" ? unifiedDiff(file.text) : splitDiff(file.text));
  }
  unified.addEventListener("click", () => mode("unified"));
  split.addEventListener("click", () => mode("split"));
  pane.replaceChildren(el("div", {class: "tabs"}, unified, split,
                          el("span", {class: "hint", text: " " + count(file.bytes) + " bytes" +
                                                           (file.cut ? " (first 4 MB)" : "")})), body);
  mode("unified");
}

function lineClass(line) {
  if (line.startsWith("diff --git") || line.startsWith("index ") || line.startsWith("--- ") ||
      line.startsWith("+++ ") || line.startsWith("new file") || line.startsWith("deleted file")) return "d-file";
  if (line.startsWith("@@")) return "d-hunk";
  if (line.startsWith("+")) return "d-add";
  if (line.startsWith("-")) return "d-del";
  return "d-ctx";
}

function unifiedDiff(text) {
  const lines = text.replace(/\n$/, "").split("\n");
  return el("pre", {class: "diff unified"}, ...lines.map(l => el("span", {class: "d-line " + lineClass(l), text: l + "\n"})));
}

function splitDiff(text) {
  const rows = [];
  let dels = [], adds = [];
  function flush() {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) {
      rows.push(pair(dels[i] === undefined ? null : dels[i], "d-del", adds[i] === undefined ? null : adds[i], "d-add"));
    }
    dels = []; adds = [];
  }
  for (const line of text.replace(/\n$/, "").split("\n")) {
    const cls = lineClass(line);
    if (cls === "d-del") { dels.push(line.slice(1)); continue; }
    if (cls === "d-add") { adds.push(line.slice(1)); continue; }
    flush();
    if (cls === "d-file" || cls === "d-hunk") {
      rows.push(el("tr", {class: cls}, el("td", {colspan: "2", text: line})));
    } else {
      rows.push(pair(line.slice(1), "d-ctx", line.slice(1), "d-ctx"));
    }
  }
  flush();
  return el("table", {class: "diff split"}, el("tbody", {}, ...rows));
}

function pair(left, leftClass, right, rightClass) {
  return el("tr", {},
    el("td", {class: left === null ? "d-none" : leftClass, text: left === null ? "" : left}),
    el("td", {class: right === null ? "d-none" : rightClass, text: right === null ? "" : right}));
}
