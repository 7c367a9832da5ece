/**
 * The little of `cloudflare:workers` the bare Worker uses, for the bench's Node type check (the Workers types
 * would clash there with Node's and the DOM's globals). wrangler bundles the real module.
 */
declare module "cloudflare:workers" {
  export abstract class DurableObject<Env = unknown> {
    protected ctx: { storage: { sql: { exec(query: string, ...bindings: unknown[]): unknown } } };
    protected env: Env;
    constructor(ctx: DurableObject["ctx"], env: Env);
  }
}
