// Building the page: every piece of text goes in with textContent (or an SVG <text>'s textContent),
// never through innerHTML, so nothing a model or an input file wrote is ever parsed as markup. The
// server has already escaped every string (control, bidi and invisible characters made visible).
"use strict";

export const csrf = document.querySelector('meta[name="csrf-token"]').content;

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  setAttrs(node, attrs);
  for (const child of children) node.appendChild(child);
  return node;
}

function setAttrs(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (/^[a-z][a-z0-9-]*$/i.test(name) && !/^on/i.test(name)) node.setAttribute(name, String(value));
  }
}

// A CSS class made of a value read from a run folder (a role, a state, a status) goes through these
// fixed tables: a value not in its table gets the neutral "other", so no folder ever names a class.
export const CLASSES = {
  role: ["system", "user", "assistant", "invalid"],
  state: ["finished", "running", "stopped", "incomplete", "damaged"],
  status: ["resolved", "unresolved", "patch_failed", "empty_patch", "error", "unsupported", "incomplete"],
  tests: ["true", "false"],
  change: ["broken", "fixed", "changed", "same"],
  outcome: ["answered", "truncated", "refused", "bad_request", "budget", "model_error"],
};

export function cls(prefix, kind, value) {
  return prefix + (typeof value === "string" && CLASSES[kind].includes(value) ? value : "other");
}

export function setStatus(text, isError) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.className = isError ? "status error" : "status";
}

export class ApiError extends Error {}

export async function getJSON(path) {
  let response;
  try {
    response = await fetch(path, {credentials: "same-origin"});
  } catch (err) {
    throw new ApiError("cannot reach the server: " + err);
  }
  const data = await response.json().catch(() => ({error: "not JSON"}));
  if (!response.ok) throw new ApiError("error " + response.status + ": " + data.error);
  return data;
}

export async function postJSON(path, body) {
  const response = await fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
    body: JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({error: "not JSON"}));
  return {ok: response.ok, data};
}

export function when(ts) {
  return ts ? new Date(ts * 1000).toLocaleString() : "-";
}

export function seconds(value) {
  if (value === null || value === undefined) return "-";
  if (value < 1) return (value * 1000).toFixed(0) + " ms";
  if (value < 120) return value.toFixed(1) + " s";
  return (value / 60).toFixed(1) + " min";
}

export function count(value) {
  if (value === null || value === undefined) return "-";
  if (value >= 1e6) return (value / 1e6).toFixed(1) + "M";
  if (value >= 1e4) return (value / 1e3).toFixed(0) + "k";
  return String(value);
}

// A cost the run did not know (no price for its model) is said to be unknown, never shown as 0 or blank.
export function money(value) {
  return value === null || value === undefined ? "unknown" : "$" + Number(value).toFixed(4);
}

export function q(params) {
  return new URLSearchParams(params).toString();
}

export function link(hash, text, attrs) {
  return el("a", {href: hash, text, ...(attrs || {})});
}

// Calls `refresh` now and every `ms`, saying on the status line when it last worked or why it failed;
// returns the function that stops it (a view's cleanup).
export function polling(refresh, ms) {
  async function tick() {
    try {
      await refresh();
      setStatus("live · updated " + new Date().toLocaleTimeString(), false);
    } catch (err) {
      setStatus(String(err.message || err), true);
    }
  }
  tick();
  const timer = setInterval(tick, ms);
  return () => clearInterval(timer);
}
