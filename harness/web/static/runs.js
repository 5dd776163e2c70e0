// The runs view: every `harness run` and `harness eval` folder below the console's roots, newest
// first, with filters and a search; refreshed every few seconds (a running one shows as such).
"use strict";

import {cls, count, el, getJSON, link, money, polling, q, seconds, when} from "./dom.js";
import {progressText} from "./evaluation.js";

export function runsView(main) {
  const search = el("input", {type: "search", id: "runs-search", placeholder: "search task, agent, model, folder…"});
  const kind = select("runs-kind", [["", "runs and evaluations"], ["run", "runs"], ["eval", "evaluations"]]);
  const state = select("runs-state", [["", "any state"], ["finished", "finished"], ["running", "running"],
                                      ["stopped", "stopped (no result)"], ["incomplete", "incomplete"],
                                      ["damaged", "damaged"]]);
  const tests = select("runs-tests", [["", "any tests"], ["true", "tests passed"], ["false", "tests failed"],
                                      ["null", "no tests"]]);
  const stop = select("runs-stop", [["", "any stop reason"]]);
  const body = el("tbody");
  const roots = el("p", {class: "hint"});
  const shown = el("span", {id: "runs-count"});
  main.append(
    el("h1", {text: "Runs and evaluations"}), roots,
    el("div", {class: "filters"}, search, kind, state, tests, stop, shown),
    el("table", {id: "runs-table", class: "list"},
       el("thead", {}, el("tr", {}, ...["folder", "kind", "task", "agent", "model", "stop reason", "tests", "turns",
                                        "tokens in/out", "cost", "time", "state", "changed"]
         .map(h => el("th", {text: h})))),
       body));
  let rows = [];
  let last = "";

  function matches(r) {
    const text = search.value.trim().toLowerCase();
    if (text && ![r.name, r.task, r.agent, r.model, r.ref].some(v => String(v || "").toLowerCase().includes(text))) return false;
    if (kind.value && r.kind !== kind.value) return false;
    if (state.value && r.state !== state.value) return false;
    if (tests.value && String(r.kind === "run" ? r.tests_passed : "x") !== tests.value) return false;
    if (stop.value && r.stop_reason !== stop.value) return false;
    return true;
  }

  function render() {
    const visible = rows.filter(matches);
    body.replaceChildren(...visible.map(r => el("tr", {"data-ref": r.ref, "data-name": r.name, "data-kind": r.kind,
                                                class: cls("state-", "state", r.state_class)},
      el("td", {}, link((r.kind === "eval" ? "#/eval?" : "#/run?") + q({ref: r.ref}), r.name, {class: "open"})),
      el("td", {text: r.kind}),
      r.damaged ? el("td", {class: "error-cell damaged-why", text: r.damaged})
        : r.kind === "eval" && r.state !== "finished" ? el("td", {class: "progress", text: progressText(r.progress)})
        : el("td", {text: r.task || "-"}),
      el("td", {class: "agent", text: r.agent || "-"}),
      el("td", {text: r.model || "-"}),
      el("td", {text: r.stop_reason || "-"}),
      el("td", {class: cls("tests-", "tests", r.tests_class),
                text: r.kind === "eval" ? (r.resolved ?? "-") + " / " + (r.total ?? "-") + " resolved"
                                        : r.tests_passed === true ? "passed" : r.tests_passed === false ? "failed" : "-"}),
      el("td", {text: count(r.turns)}),
      el("td", {text: r.tokens ? count(r.tokens.input) + " / " + count(r.tokens.output) : "-"}),
      el("td", {text: money(r.cost_usd)}),
      el("td", {text: seconds(r.seconds)}),
      el("td", {class: "state", text: r.state}),
      el("td", {text: when(r.changed)}))));
    shown.textContent = visible.length + " of " + rows.length + " shown";
  }

  search.addEventListener("input", render);
  for (const choice of [kind, state, tests, stop]) {      // a select changed by a script or a driver fires only
    choice.addEventListener("input", render);             // "change" (a text box fires it on blur: not there, or a
    choice.addEventListener("change", render);            // click on a row would land on a row redrawn under it)
  }

  async function refresh() {
    const data = await getJSON("/api/runs");
    roots.textContent = "Folders shown: " + data.roots.join(", ") + " (add more with `harness web --runs DIR`)" +
      (data.cut && data.cut.length ? ". Not looked at: " + data.cut.join("; ") : "");
    const text = JSON.stringify(data.runs);
    if (text !== last) {
      last = text;
      rows = data.runs;
      const reasons = [...new Set(rows.map(r => r.stop_reason).filter(Boolean))].sort();
      const chosen = stop.value;
      stop.replaceChildren(el("option", {value: "", text: "any stop reason"}),
                           ...reasons.map(r => el("option", {value: r, text: r})));
      stop.value = reasons.includes(chosen) ? chosen : "";
      render();
    }
  }
  return polling(refresh, 3000);
}

export function select(id, options) {
  return el("select", {id}, ...options.map(([value, text]) => el("option", {value, text})));
}
