/**
 * The runtime's ceiling on this machine: read the whole body, answer 200. Same workerd, same wrangler dev
 * proxy, same request shape as the receiver gets, and none of the receiver's work.
 */
export default {
  async fetch(request: Request): Promise<Response> {
    if (request.method === "POST") await request.arrayBuffer();
    return new Response("ok");
  },
};
