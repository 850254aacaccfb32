/**
 * sowdb's web console (SPEC §12), served by `sowd` on `[server] http_listen`: the topics with
 * their figures, and a live grid of any topic. Plain DOM, no framework; the calls use the Node
 * SDK's generated code and its event and error helpers, bundled by esbuild (`make setup`).
 *
 * Where the page is lives in the address (`#topics`, `#grid?topic=orders&filter=...`), so a
 * grid can be bookmarked or linked to.
 */
import { gridHash } from "./dom.ts";
import { Grid, type GridSettings } from "./grid.ts";
import { setToken, token } from "./rpc.ts";
import { TopicsPage } from "./topics.ts";

const DEFAULT_PAGE_SIZE = 20;

function input(id: string): HTMLInputElement {
  return document.getElementById(id) as HTMLInputElement;
}

function whole(text: string | null, fallback: number): number {
  const n = Number(text);
  return Number.isInteger(n) && n >= 1 ? n : fallback;
}

function settingsFrom(params: URLSearchParams): GridSettings {
  return {
    topic: params.get("topic") ?? "",
    filter: params.get("filter") ?? "",
    orderBy: params.get("order_by") ?? "",
    pageSize: whole(params.get("size"), DEFAULT_PAGE_SIZE),
    page: whole(params.get("page"), 1),
  };
}

function settingsOfForm(): GridSettings {
  return {
    topic: input("topic").value.trim(),
    filter: input("filter").value,
    orderBy: input("order-by").value,
    pageSize: whole(input("page-size").value, DEFAULT_PAGE_SIZE),
    page: whole(input("page").value, 1),
  };
}

function fillForm(s: GridSettings): void {
  input("topic").value = s.topic;
  input("filter").value = s.filter;
  input("order-by").value = s.orderBy;
  input("page-size").value = String(s.pageSize);
  input("page").value = String(s.page);
}

function hashOf(s: GridSettings): string {
  return gridHash({
    topic: s.topic,
    filter: s.filter,
    order_by: s.orderBy,
    size: String(s.pageSize),
    page: String(s.page),
  });
}

const grid = new Grid();
const topics = new TopicsPage((names) => {
  const list = document.getElementById("topic-names")!;
  if (list.childElementCount === names.length) return;
  list.replaceChildren(...names.map((n) => Object.assign(document.createElement("option"), { value: n })));
});

/** Shows the page the address names, and (re)starts what that page keeps live. */
function route(): void {
  const [page, query] = window.location.hash.slice(1).split("?", 2);
  const onGrid = page === "grid";
  document.getElementById("topics-page")!.hidden = onGrid;
  document.getElementById("grid-page")!.hidden = !onGrid;
  document.getElementById("nav-topics")!.classList.toggle("current", !onGrid);
  document.getElementById("nav-grid")!.classList.toggle("current", onGrid);
  if (onGrid) {
    topics.stop();
    const s = settingsFrom(new URLSearchParams(query ?? ""));
    fillForm(s);
    if (s.topic) grid.subscribe(s);
    else grid.stop();
    void topics.refresh(); // once: the topic box's suggestions
  } else {
    grid.stop();
    topics.start();
  }
}

function go(s: GridSettings): void {
  const hash = hashOf(s);
  if (window.location.hash === hash) route(); // the same settings: subscribe again
  else window.location.hash = hash;
}

document.getElementById("grid-form")!.addEventListener("submit", (e) => {
  e.preventDefault();
  go(settingsOfForm());
});
for (const [id, step] of [["prev-page", -1], ["next-page", 1]] as const) {
  document.getElementById(id)!.addEventListener("click", () => {
    const s = settingsOfForm();
    go({ ...s, page: Math.max(1, s.page + step) });
  });
}
const tokenBox = input("token");
tokenBox.value = token();
tokenBox.addEventListener("change", () => {
  setToken(tokenBox.value);
  route(); // every call from now on carries the new token
});
window.addEventListener("hashchange", route);
route();
