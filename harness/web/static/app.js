// The console's router: #/runs, #/run?ref=..., #/eval?ref=..., #/compare?a=...&b=..., #/approvals.
// Each view draws into <main id="view"> and returns a function that stops its timers.
"use strict";

import {approvalsView, pendingBadge} from "./approvals.js";
import {el, setStatus} from "./dom.js";
import {compareView, evalView} from "./evaluation.js";
import {runView} from "./run.js";
import {runsView} from "./runs.js";

const landing = document.querySelector('meta[name="landing"]').content;
const views = {runs: runsView, run: runView, eval: evalView, compare: compareView, approvals: approvalsView};
let stop = null;

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [name, query] = hash.split("?", 2);
  const view = views[name] || views[landing] || runsView;
  if (stop) stop();
  const main = document.getElementById("view");
  main.replaceChildren();
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("current", a.id === "nav-" + (name === "run" || name === "eval" || name === "compare"
                                                      ? "runs" : (views[name] ? name : landing)));
  }
  try {
    stop = view(main, new URLSearchParams(query || ""));
  } catch (err) {
    main.appendChild(el("p", {class: "error-line", text: String(err)}));
    setStatus(String(err), true);
  }
}

window.addEventListener("hashchange", route);
route();
pendingBadge();
