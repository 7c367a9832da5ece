import http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The user's backend for the meters phase's forward destination: answers 200 to every forward, on a free port,
 * and counts what it received. It checks nothing: the forward path's signing is proven by the test suite.
 */
export async function startForwardBackend(): Promise<{
  port: number;
  received: () => number;
  close: () => Promise<void>;
}> {
  let received = 0;
  const server = http.createServer((request, response) => {
    request.resume();
    request.on("end", () => {
      received++;
      response.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    received: () => received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
