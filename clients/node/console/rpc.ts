/**
 * The console's calls: the server's own services over the Connect protocol, from the page's
 * origin (sowd serves the page and the Connect gateway on the same `http_listen`).
 *
 * Messages travel in the protobuf binary format: the gateway hands them to the gRPC port
 * without decoding them, so it offers no JSON. The token box's token goes with every call as
 * `authorization: Bearer TOKEN`, checked by the server like any SDK's (SPEC §11).
 */
import { type Client, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { AdminService } from "../src/gen/sowdb/v1/admin_pb.ts";
import { SowService } from "../src/gen/sowdb/v1/sow_pb.ts";

const TOKEN_KEY = "sowdb-console-token";

const transport = createConnectTransport({ baseUrl: window.location.origin, useBinaryFormat: true });

/** The SowService client of the page. */
export const sow: Client<typeof SowService> = createClient(SowService, transport);

/** The AdminService client of the page (the topics' figures: Stats). */
export const admin: Client<typeof AdminService> = createClient(AdminService, transport);

/** The token of the token box: kept for this tab only (sessionStorage), never elsewhere. */
export function token(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? "";
}

export function setToken(value: string): void {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** The headers of a call: the caller's token, when one is set. */
export function authHeaders(): Record<string, string> {
  const t = token().trim();
  return t ? { authorization: `Bearer ${t}` } : {};
}
