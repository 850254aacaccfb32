/** Small DOM helpers of the console's pages. */

/** An element with attributes and text. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  text?: string,
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

/** Shows or hides an element. */
export function show(e: HTMLElement, visible: boolean): void {
  e.hidden = !visible;
}

/** The grid's address for a topic, with its other settings (`#grid?topic=orders&...`). */
export function gridHash(settings: Record<string, string>): string {
  const params = new URLSearchParams(Object.entries(settings).filter(([, v]) => v !== ""));
  return `#grid?${params.toString()}`;
}

/** A link that opens the grid of a topic. */
export function gridLink(topic: string): HTMLAnchorElement {
  const a = el("a", { href: gridHash({ topic }) }, topic);
  return a;
}
