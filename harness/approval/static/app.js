// The approvals page: polls /api/state and updates without reloading. Every piece of text is set
// with textContent, never parsed as HTML; decisions carry the CSRF token and the hash of the
// request as shown, so a request that changed cannot be approved by mistake.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
let version = -1;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "text") node.textContent = value; else node.setAttribute(name, value);
  }
  for (const child of children) node.appendChild(child);
  return node;
}

function when(ts) {
  return ts ? new Date(ts * 1000).toLocaleString() : "-";
}

function setStatus(text, isError) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.className = isError ? "status error" : "status";
}

async function decide(request, decision, reasonInput, errorLine) {
  errorLine.textContent = "";
  const response = await fetch("/api/decide", {
    method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
    body: JSON.stringify({id: request.id, decision: decision, reason: reasonInput.value, hash: request.hash}),
  });
  const data = await response.json();
  if (!response.ok) { errorLine.textContent = data.error; return; }
  await refresh();
}

function card(request) {
  const reason = el("input", {type: "text", "data-role": "reason",
                              placeholder: "reason (optional; a denial's reason is passed to the model)"});
  const errorLine = el("div", {class: "error-line"});
  const approve = el("button", {class: "approve", "data-role": "approve", text: "Approve #" + request.id});
  const deny = el("button", {class: "deny", "data-role": "deny", text: "Deny #" + request.id});
  approve.addEventListener("click", () => decide(request, "approve", reason, errorLine));
  deny.addEventListener("click", () => decide(request, "deny", reason, errorLine));
  return el("article", {class: "request", id: "request-" + request.id, "data-id": String(request.id)},
    el("h3", {text: "#" + request.id + "  " + request.tool}),
    el("div", {class: "meta", text: "session " + request.session + " · key " + request.key + " · asked " +
                                   when(request.created_at) + " · hash " + request.hash.slice(0, 12)}),
    el("div", {class: "preview-frame"},
       el("div", {class: "preview-label", text: "what will run if you approve (written by the model)"}),
       el("pre", {class: "preview", text: request.preview})),
    el("div", {class: "actions"}, reason, approve, deny),
    errorLine);
}

function renderPending(pending) {
  const box = document.getElementById("pending");
  const wanted = new Set(pending.map(r => "request-" + r.id));
  for (const node of Array.from(box.children)) if (!wanted.has(node.id)) node.remove();
  for (const request of pending) {
    if (!document.getElementById("request-" + request.id)) box.appendChild(card(request));
  }
  document.getElementById("pending-count").textContent = String(pending.length);
  document.getElementById("no-pending").hidden = pending.length > 0;
}

function renderHistory(history) {
  const body = document.querySelector("#history tbody");
  body.replaceChildren(...history.map(r => el("tr", {id: "history-" + r.id, "data-status": r.status},
    el("td", {text: String(r.id)}), el("td", {text: r.tool}), el("td", {text: r.key}),
    el("td", {class: "status-cell", text: r.status}),
    el("td", {text: r.decided_by + " " + when(r.decided_at)}),
    el("td", {text: r.reason + (r.rule ? " (rule " + r.rule + ")" : "")}),
    el("td", {}, el("pre", {text: r.result === null ? "" : r.result})))));
}

async function refresh() {
  try {
    const response = await fetch("/api/state", {credentials: "same-origin"});
    if (!response.ok) {
      setStatus("error " + response.status + ": " + (await response.json()).error, true);
      return;
    }
    const state = await response.json();
    if (state.version !== version) {
      version = state.version;
      renderPending(state.pending);
      renderHistory(state.history);
    }
    setStatus("live · updated " + new Date().toLocaleTimeString(), false);
  } catch (err) {
    setStatus("cannot reach the server: " + err, true);
  }
}

refresh();
setInterval(refresh, 1000);
