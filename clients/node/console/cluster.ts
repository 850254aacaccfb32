/**
 * The cluster table of the topics page (SPEC §13): on a node of a cluster, each node's role,
 * epoch, applied bookmark and lag, as the node answers ClusterStatus (itself first, then on a
 * primary every replica following it). It comes in the Stats answer the topics page asks for
 * anyway (`cluster`, for a caller with an admin role), so a server alone is asked nothing more
 * and the table stays hidden.
 */
import type { ClusterNode } from "../src/gen/sowdb/v1/admin_pb.ts";
import { el, show } from "./dom.ts";

function cell(field: string, value: string, num = false): HTMLTableCellElement {
  return el("td", { "data-field": field, ...(num ? { class: "num" } : {}) }, value);
}

function row(n: ClusterNode): HTMLTableRowElement {
  const tr = el("tr", { "data-node": n.node, "data-role": n.role });
  tr.append(
    cell("node", n.node),
    cell("address", n.address),
    cell("role", n.role),
    cell("epoch", n.epoch.toString(), true),
    cell("applied", n.appliedBookmark.toLocaleString("en-US"), true),
    cell("lag", n.lag.toLocaleString("en-US"), true),
  );
  return tr;
}

/** Shows `nodes` in the cluster table; hides it when there are none (a server alone). */
export function showCluster(nodes: readonly ClusterNode[]): void {
  document.querySelector("#cluster tbody")!.replaceChildren(...nodes.map(row));
  show(document.getElementById("cluster-section")!, nodes.length > 0);
}
