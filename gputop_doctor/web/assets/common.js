// What the live page and the fleet page share: element helpers that only ever set text
// (textContent, never HTML), and the server-sent-events stream with its live/reconnecting status.
"use strict";

function $(id) {
  return document.getElementById(id);
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function num(value, digits, unit) {
  if (value === null || value === undefined) return "–";
  return value.toFixed(digits) + (unit || "");
}

function stream(path, apply) {
  const source = new EventSource(path);
  const status = $("status");
  source.addEventListener("open", () => {
    status.textContent = "live";
    status.classList.remove("down");
  });
  source.addEventListener("error", () => {
    status.textContent = "reconnecting…";
    status.classList.add("down");
  });
  source.addEventListener("frame", (event) => apply(JSON.parse(event.data)));
}
