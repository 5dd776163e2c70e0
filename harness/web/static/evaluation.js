// An evaluation's report: totals, pass@1 with its interval and pass@k over the epochs, the per-instance
// table (pass counts, each epoch's status) with status filters and a search, bars of the statuses per
// repository, the distribution of instance times, and a comparison with another evaluation (which
// instances flipped, and whether the difference is more than noise). While the evaluation runs, its
// progress (done / total attempts, resolved so far, ETA) is read again every 3 s.
"use strict";

import {cls, count, el, getJSON, link, money, q, seconds, setStatus, svg} from "./dom.js";

const STATUSES = ["resolved", "unresolved", "patch_failed", "empty_patch", "error", "unsupported", "incomplete"];

export function evalView(main, params) {
  const ref = params.get("ref") || "";
  const kept = {hidden: new Set(), search: ""};      // the filters, kept across the live refreshes
  let timer = null, last = "", stopped = false;
  async function load() {
    try {
      const [data, list] = await Promise.all([getJSON("/api/eval?" + q({ref})), getJSON("/api/runs")]);
      const text = JSON.stringify(data);
      if (text !== last && !stopped) {
        last = text;
        render(main, data, ref, list.runs.filter(r => r.kind === "eval" && r.ref !== ref), kept);
      }
      const running = data.summary.state === "running";
      setStatus((running ? "live · updated " : "report read ") + new Date().toLocaleTimeString(), false);
      if (running && !stopped) timer = setTimeout(load, 3000);
    } catch (err) {
      main.replaceChildren(el("p", {class: "error-line", text: String(err.message || err)}));
      setStatus(String(err.message || err), true);
    }
  }
  load();
  return () => { stopped = true; clearTimeout(timer); };
}

function num(value, digits) {
  return typeof value === "number" ? value.toFixed(digits) : "?";
}

// "4 of 9 attempts done · 3 resolved so far · ETA 1.2 min" for an unfinished evaluation.
export function progressText(p) {
  if (!p || typeof p !== "object") return "";
  const eta = typeof p.eta_seconds === "number" ? "ETA " + seconds(p.eta_seconds)
    : p.state === "running" ? "ETA after the first attempt" : "stopped: continue it with --resume";
  return (p.done ?? "?") + " of " + (p.total ?? "?") + " attempts done · " + (p.resolved ?? 0) +
    " resolved so far · " + eta;
}

function statistics(stats, epochs) {
  if (!stats || typeof stats.pass_at_1 !== "number") return null;
  const ci = Array.isArray(stats.pass_at_1_ci) ? stats.pass_at_1_ci : [];
  const atK = Object.entries(stats.pass_at_k || {}).filter(([k]) => k !== "1")
    .map(([k, v]) => "pass@" + k + " " + num(v, 3));
  const flipped = Array.isArray(stats.flipped_ids) ? stats.flipped_ids : [];
  const left = Object.entries(stats.left_out || {});
  return el("div", {id: "eval-stats", class: "stats"},
    el("p", {}, el("strong", {id: "pass-at-1", text: "pass@1 " + num(stats.pass_at_1, 3)}),
       " (95% CI " + num(ci[0], 3) + " to " + num(ci[1], 3) + ", " + (stats.ci_method || "?") + ", effective n " +
       num(stats.effective_n, 1) + "; " + (stats.instances_counted ?? "?") + " instances × " + epochs + " epoch(s))",
       atK.length ? " · " : "", atK.length ? el("span", {id: "pass-at-k", text: atK.join(" · ")}) : null),
    epochs > 1 ? el("p", {id: "flipped", text: "flipped between epochs (" + flipped.length + "): " +
                                               (flipped.length ? flipped.join(", ") : "none")}) : null,
    left.length ? el("p", {id: "left-out", text: "left out of the statistics (" + left.length + "): " +
                                                 left.map(([i, why]) => i + " (" + why + ")").join("; ")}) : null);
}

function epochCell(r) {
  if (!Array.isArray(r.epochs)) return el("td", {text: r.passes || "-"});
  return el("td", {class: "epochs"}, el("span", {class: "passes", text: (r.passes || "-") + " "}),
    ...r.epochs.map(e => e.run
      ? link("#/run?" + q({ref: e.run}), String(e.epoch), {class: "epoch " + cls("s-", "status", e.status_class),
                                                          title: "epoch " + e.epoch + ": " + e.status})
      : el("span", {class: "epoch s-incomplete", text: String(e.epoch), title: "epoch " + e.epoch + ": not finished"})));
}

function render(main, data, ref, others, kept) {
  const totals = data.totals;
  const epochs = typeof data.epochs === "number" ? data.epochs : 1;
  const progress = data.summary.progress;
  const present = STATUSES.filter(s => data.instances.some(r => r.status === s));
  const boxes = present.map(s => el("label", {class: "chip " + cls("s-", "status", s)},
    el("input", {type: "checkbox", checked: !kept.hidden.has(s), "data-status": s}),
    " " + s + " (" + data.instances.filter(r => r.status === s).length + ")"));
  const search = el("input", {type: "search", id: "eval-search", placeholder: "instance or repository…",
                              value: kept.search});
  const body = el("tbody");
  const shown = el("span", {id: "eval-count"});
  const compare = el("select", {id: "compare-with"}, el("option", {value: "", text: "compare with…"}),
                     ...others.map(o => el("option", {value: o.ref, text: o.name + " (" + (o.model || "?") + ")"})));
  compare.addEventListener("change", () => {
    if (compare.value) location.hash = "#/compare?" + q({a: ref, b: compare.value});
  });

  function filter() {
    const inputs = boxes.map(b => b.querySelector("input"));
    kept.hidden = new Set(inputs.filter(i => !i.checked).map(i => i.dataset.status));
    kept.search = search.value;
    const wanted = new Set(inputs.filter(i => i.checked).map(i => i.dataset.status));
    const text = search.value.trim().toLowerCase();
    const rows = data.instances.filter(r => wanted.has(r.status) &&
      (!text || r.instance_id.toLowerCase().includes(text) || String(r.repo).toLowerCase().includes(text)));
    body.replaceChildren(...rows.map(r => el("tr", {"data-status": r.status, "data-instance": r.instance_id},
      el("td", {}, r.run ? link("#/run?" + q({ref: r.run}), r.instance_id) : r.instance_id),
      el("td", {class: "status " + cls("s-", "status", r.status_class), text: r.status + (r.flaky ? " (flaky)" : "")}),
      epochCell(r),
      el("td", {text: r.repo}),
      el("td", {text: seconds(r.duration)}),
      el("td", {text: count(r.turns)}),
      el("td", {text: money(r.cost_usd)}),
      el("td", {text: r.stop_reason || "-"}),
      el("td", {class: "error-cell", text: r.error || ""}))));
    shown.textContent = rows.length + " of " + data.instances.length + " shown";
  }
  for (const b of boxes) b.querySelector("input").addEventListener("change", filter);
  search.addEventListener("input", filter);

  const unfinished = data.summary.state === "running" || data.summary.state === "incomplete";
  main.replaceChildren(...[
    el("h1", {}, "Evaluation ", el("span", {class: "mono", text: data.summary.name})),
    unfinished ? el("p", {id: "eval-progress", class: "progress " + cls("state-", "state", data.summary.state_class)},
                    el("strong", {text: data.summary.state + ": "}), progressText(progress)) : null,
    el("p", {}, el("strong", {text: data.model || data.summary.model || "?"}),
       data.agent ? el("span", {id: "eval-agent", text: " run by the agent " + data.agent}) : null, " · ", epochs > 1 ? epochs + " epochs · " : "",
       totals.total_instances === undefined ? "no attempt finished yet" :
       (totals.resolved_instances ?? 0) + " of " + (totals.total_instances ?? 0) + " resolved · " +
       (totals.error_instances ?? 0) + " errors · " + (totals.unsupported_instances ?? 0) + " unsupported · " +
       (totals.incomplete_instances ?? 0) + " incomplete · " + seconds(data.summary.seconds) + " of instance time" +
       (data.summary.cost_usd === null || data.summary.cost_usd === undefined ? "" : " · " + money(data.summary.cost_usd)),
       " ", compare),
    data.summary.damaged ? el("pre", {class: "error-box damaged-why", text: "damaged: " + data.summary.damaged}) : null,
    statistics(data.statistics, epochs),
    el("div", {class: "charts"},
       el("figure", {}, el("figcaption", {text: "statuses per repository"}), repoBars(data.repositories, present)),
       el("figure", {}, el("figcaption", {text: "instance times"}), histogram(data.instances.map(r => r.duration)
                                                                             .filter(d => typeof d === "number")))),
    el("div", {class: "filters", id: "eval-filters"}, ...boxes, search, shown),
    el("table", {id: "eval-table", class: "list"},
       el("thead", {}, el("tr", {}, ...["instance", epochs > 1 ? "status (epoch 1)" : "status",
                                        epochs > 1 ? "passes · epochs" : "passes", "repository", "time", "turns", "cost",
                                        "stop reason", "error"].map(h => el("th", {text: h})))),
       body)].filter(Boolean));
  filter();
}

function repoBars(repositories, statuses) {
  const names = Object.keys(repositories);
  const most = Math.max(1, ...names.map(n => Object.values(repositories[n]).reduce((a, b) => a + b, 0)));
  const width = 640, label = 200, rowHeight = 22;
  const chart = svg("svg", {id: "repo-bars", class: "chart", width, height: names.length * rowHeight + 24,
                            viewBox: "0 0 " + width + " " + (names.length * rowHeight + 24), role: "img"});
  names.forEach((name, i) => {
    const y = i * rowHeight;
    const text = svg("text", {x: 0, y: y + 15, class: "axis"});
    text.textContent = name;
    chart.appendChild(text);
    let x = label;
    for (const status of statuses) {
      const n = repositories[name][status] || 0;
      if (!n) continue;
      const w = (width - label - 40) * n / most;
      const rect = svg("rect", {x, y: y + 3, width: Math.max(w, 1), height: rowHeight - 6, class: cls("s-", "status", status),
                                "data-repo": name, "data-status": status});
      const tip = svg("title");
      tip.textContent = name + ": " + n + " " + status;
      rect.appendChild(tip);
      chart.appendChild(rect);
      x += w;
    }
    const total = svg("text", {x: x + 4, y: y + 15, class: "axis"});
    total.textContent = String(Object.values(repositories[name]).reduce((a, b) => a + b, 0));
    chart.appendChild(total);
  });
  const legendY = names.length * rowHeight + 16;
  let lx = 0;
  for (const status of statuses) {
    chart.appendChild(svg("rect", {x: lx, y: legendY - 9, width: 10, height: 10, class: cls("s-", "status", status)}));
    const t = svg("text", {x: lx + 14, y: legendY, class: "axis"});
    t.textContent = status;
    chart.appendChild(t);
    lx += 16 + status.length * 7;
  }
  return chart;
}

function histogram(values) {
  const width = 420, height = 160, bins = 20;
  const chart = svg("svg", {id: "time-histogram", class: "chart", width, height: height + 30,
                            viewBox: "0 0 " + width + " " + (height + 30), role: "img"});
  if (!values.length) {
    const t = svg("text", {x: 0, y: 20, class: "axis"});
    t.textContent = "no finished instance";
    chart.appendChild(t);
    return chart;
  }
  const top = Math.max(...values), step = top / bins || 1;
  const counts = new Array(bins).fill(0);
  for (const v of values) counts[Math.min(bins - 1, Math.floor(v / step))] += 1;
  const most = Math.max(...counts);
  counts.forEach((n, i) => {
    const h = height * n / most;
    const rect = svg("rect", {x: i * width / bins + 1, y: height - h, width: width / bins - 2, height: h, class: "bar",
                              "data-count": n});
    const tip = svg("title");
    tip.textContent = n + " instance(s) of " + seconds(i * step) + " to " + seconds((i + 1) * step);
    rect.appendChild(tip);
    chart.appendChild(rect);
  });
  for (const [x, text, anchor] of [[0, "0", "start"], [width, seconds(top), "end"]]) {
    const t = svg("text", {x, y: height + 16, class: "axis", "text-anchor": anchor});
    t.textContent = text;
    chart.appendChild(t);
  }
  return chart;
}

export function compareView(main, params) {
  const a = params.get("a") || "", b = params.get("b") || "";
  (async () => {
    try {
      const data = await getJSON("/api/compare?" + q({a, b}));
      const filter = el("select", {id: "compare-filter"},
        ...[["flipped", "flipped only"], ["", "all instances"], ["broken", "broken"], ["fixed", "fixed"],
            ["changed", "other changes"], ["same", "unchanged"]].map(([v, t]) => el("option", {value: v, text: t})));
      const body = el("tbody");
      function render() {
        const rows = data.rows.filter(r => !filter.value ? true : filter.value === "flipped"
          ? r.change === "broken" || r.change === "fixed" : r.change === filter.value);
        body.replaceChildren(...rows.map(r => el("tr", {"data-change": r.change, "data-instance": r.instance_id},
          el("td", {text: r.instance_id}),
          el("td", {class: "status " + cls("s-", "status", r.a_class)}, r.run_a ? link("#/run?" + q({ref: r.run_a}), r.a || "-") : (r.a || "-")),
          el("td", {class: "passes", text: r.passes_a || "-"}),
          el("td", {class: "status " + cls("s-", "status", r.b_class)}, r.run_b ? link("#/run?" + q({ref: r.run_b}), r.b || "-") : (r.b || "-")),
          el("td", {class: "passes", text: r.passes_b || "-"}),
          el("td", {class: "change " + cls("c-", "change", r.change), text: r.change}))));
      }
      filter.addEventListener("change", render);
      const c = data.counts;
      main.replaceChildren(
        el("h1", {text: "Comparing two evaluations"}),
        el("p", {}, "A: ", link("#/eval?" + q({ref: a}), data.a.name), " (" + (data.a.model || "?") + ", " +
           (data.a.resolved ?? "?") + " resolved)  ·  B: ", link("#/eval?" + q({ref: b}), data.b.name),
           " (" + (data.b.model || "?") + ", " + (data.b.resolved ?? "?") + " resolved)"),
        el("p", {id: "compare-counts", text: c.fixed + " fixed in B · " + c.broken + " broken in B · " + c.changed +
                                             " other changes · " + c.same + " unchanged"}),
        difference(data.statistics),
        filter,
        el("table", {id: "compare-table", class: "list"},
           el("thead", {}, el("tr", {}, ...["instance", "A", "passes A", "B", "passes B", "change"]
             .map(h => el("th", {text: h})))), body));
      render();
      setStatus("compared " + new Date().toLocaleTimeString(), false);
    } catch (err) {
      main.replaceChildren(el("p", {class: "error-line", text: String(err.message || err)}));
      setStatus(String(err.message || err), true);
    }
  })();
  return () => {};
}

const VERDICTS = {better: "B is better (the interval is above 0)", worse: "B is worse (the interval is below 0)"};

// B − A of pass@1 over the instances both graded, its 95% interval and what it means.
function difference(stats) {
  if (!stats || typeof stats.difference !== "number") {
    return el("p", {id: "compare-stats", text: "no instance was graded in both: no difference to compute"});
  }
  const ci = Array.isArray(stats.ci) ? stats.ci : [];
  const sign = v => typeof v === "number" ? (v >= 0 ? "+" : "") + v.toFixed(3) : "?";
  const left = Object.entries(stats.left_out || {});
  return el("div", {id: "compare-stats", class: "stats"},
    el("p", {}, el("strong", {id: "compare-difference", text: "B − A: " + sign(stats.difference)}),
       " (95% CI " + sign(ci[0]) + " to " + sign(ci[1]) + ", " + (stats.method || "?") + "): ",
       el("span", {id: "compare-verdict", text: VERDICTS[stats.verdict] || "no significant difference (the interval holds 0)"})),
    el("p", {text: "pass@1 A " + num(stats.pass_at_1_a, 3) + " · B " + num(stats.pass_at_1_b, 3) + " over " +
                   (stats.paired_instances ?? "?") + " paired instances · " + left.length + " left out" +
                   (left.length ? ": " + left.slice(0, 20).map(([i, why]) => i + " (" + why + ")").join("; ") : "")}));
}
