// Small DOM helpers. Server text is only ever set as text (textContent),
// never parsed as HTML.

/**
 * Creates an element: el("a", {class: "x", href: "#", onclick: fn}, "text", child).
 * Attributes: "class", "text", "dataset" (object), "on<event>" (listener),
 * booleans (true sets the attribute, false/null/undefined leaves it out),
 * anything else via setAttribute.
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === false || value === null || value === undefined) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

/** Appends strings (as text) and nodes, skipping null/undefined/false, flattening arrays. */
export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Removes every child of node and returns it. */
export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

/** Milliseconds for display: "–" when unknown, one decimal under 10 ms. */
export function ms(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return value < 10 ? `${value.toFixed(1)} ms` : `${Math.round(value)} ms`;
}

/** A score with 3 significant decimals ("–" when unknown). */
export function score(value) {
  if (value === null || value === undefined || Number.isNaN(Number(value))) return "–";
  const n = Number(value);
  return Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(3);
}

/** A share in [0, 1] as a percentage. */
export function percent(value) {
  return value === null || value === undefined ? "–" : `${(value * 100).toFixed(value && value < 0.1 ? 1 : 0)}%`;
}

/** Lower-case short name of a proto enum value: ("STAGE_STATUS_OK", "STAGE_STATUS_") -> "ok". */
export function enumName(value, prefix) {
  const name = String(value || "").replace(prefix, "").toLowerCase();
  return name === "unspecified" ? "" : name;
}

/** The collection a name field holds: trimmed, "default" when empty. */
export function collectionName(value) {
  return String(value || "").trim() || "default";
}

/**
 * The collections a search field names: split at commas (also "，" and "、") and spaces, each once, ["default"]
 * when none (a trial typed "售后,售后3" to search two and got a 400 naming the whole string).
 */
export function collectionNames(value) {
  const names = String(value || "").split(/[\s,，、;；]+/).filter(Boolean);
  return names.length ? [...new Set(names)] : ["default"];
}
