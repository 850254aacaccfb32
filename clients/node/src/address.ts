/**
 * Addresses as people type them: the one parser of `host:port` in the Node SDK.
 *
 * A port out of 1..65535 is refused here with a message that says so: Node's URL parser would
 * answer "Invalid URL" for 99999 and accept 0, which dials nothing (port 0 is a listener's "any
 * free port", never a server's address).
 */

/** The base URL of `address` (`host:port`, `[::1]:9007`, or `http(s)://host:port`).
 *
 * @throws RangeError when it is not an address, or its port is out of 1..65535.
 */
export function baseUrlOf(address: string, tls: boolean): string {
  const url = /^https?:\/\//.test(address) ? address : `${tls ? "https" : "http"}://${address.trim()}`;
  const m = /^https?:\/\/(\[[^\]]*\]|[^/:[\]]+)(?::([^/]*))?(\/.*)?$/.exec(url);
  if (m === null) throw new RangeError(`${JSON.stringify(address)} is not host:port (e.g. "127.0.0.1:9007")`);
  const port = m[2];
  if (port !== undefined && !(/^\d+$/.test(port) && Number(port) >= 1 && Number(port) <= 65535)) {
    throw new RangeError(`${JSON.stringify(address)}: the port must be a number from 1 to 65535`);
  }
  return url;
}

/** The servers of `address`: one address, a comma-separated list of them
 * (`"h1:9007,h2:9007,h3:9007"`), or an array. Each is checked as {@link baseUrlOf} checks one.
 *
 * @throws RangeError no address, an empty entry, or an entry {@link baseUrlOf} refuses.
 */
export function addressList(address: string | readonly string[], tls: boolean): string[] {
  const parts = (typeof address === "string" ? address.split(",") : [...address]).map((a) => a.trim());
  if (parts.length === 0 || parts.some((a) => a === "")) {
    throw new RangeError(`${JSON.stringify(address)}: give host:port, or servers separated by commas ("h1:9007,h2:9007")`);
  }
  for (const a of parts) baseUrlOf(a, tls);
  return parts;
}
