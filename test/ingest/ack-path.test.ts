import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import type { ClaimShard } from "../../src/claims/shard";
import { account, credit, signDemo, waitForStatus } from "../support/deliveries";
import { unreachableD1, unreachableQueue } from "../support/failpoints";
import { settleEachTest, shardClaim } from "../support/storage";

/**
 * The acknowledgement path does four things — look up, read bytes, verify, one Durable Object call — and never
 * touches D1 or the queue. Proved by answering with both of them unreachable from the Worker, and by counting the
 * Durable Object calls a delivery makes.
 */

type Answer = { status: string; receipt: string };

/** The real namespace, recording every method called on a stub it hands out. */
function countingNamespace(calls: string[]): DurableObjectNamespace<ClaimShard> {
  const real = env.CLAIM_SHARDS;
  return new Proxy(real, {
    get(target, property) {
      if (property !== "get") return Reflect.get(target, property).bind(target);
      return (shardId: DurableObjectId) => {
        const stub = target.get(shardId);
        return new Proxy(stub, {
          get(stubTarget, method) {
            if (typeof method !== "string" || method === "then") return Reflect.get(stubTarget, method);
            // Call through the stub itself: an RPC stub turns any property, `apply` included, into a remote call.
            return (...args: unknown[]) => {
              calls.push(method);
              return (stubTarget as unknown as Record<string, (...params: unknown[]) => unknown>)[method]!(...args);
            };
          },
        });
      };
    },
  }) as unknown as DurableObjectNamespace<ClaimShard>;
}

function deliver(eventKey: string, payload: unknown, workerEnv: Env): Promise<Response> {
  const body = JSON.stringify(payload);
  return Promise.resolve(
    app.fetch(
      new Request("https://receiver.test/webhooks/demo", { method: "POST", body, headers: signDemo(eventKey, body) }),
      workerEnv,
    ),
  );
}

settleEachTest();

describe("the acknowledgement path", () => {
  it("acknowledges with D1 and the queue both unreachable from the Worker: neither is on the ack path", async () => {
    const isolated = { ...env, DB: unreachableD1(), WORK_QUEUE: unreachableQueue() };
    const first = await deliver("msg_ack_isolated", credit("acct_ack_isolated", 8), isolated);
    expect(first.status).toBe(200);
    const accepted = await first.json<Answer>();
    expect(accepted.status).toBe("accepted");
    const again = await deliver("msg_ack_isolated", credit("acct_ack_isolated", 8), isolated);
    expect(await again.json()).toEqual({ status: "duplicate", receipt: accepted.receipt });

    // The shard, with its own working bindings, carries the event the rest of the way.
    expect(await waitForStatus("demo", "msg_ack_isolated")).toBe("processed");
    expect((await account("acct_ack_isolated"))?.credits).toBe(8);
  });

  it("makes exactly one Durable Object call per verified delivery, and none for a refused one", async () => {
    const calls: string[] = [];
    const counted = { ...env, CLAIM_SHARDS: countingNamespace(calls) };
    expect(
      (await (await deliver("msg_ack_counted", credit("acct_ack_counted", 1), counted)).json<Answer>()).status,
    ).toBe("accepted");
    expect(calls).toEqual(["claim"]);
    expect(
      (await (await deliver("msg_ack_counted", credit("acct_ack_counted", 1), counted)).json<Answer>()).status,
    ).toBe("duplicate");
    expect(calls).toEqual(["claim", "claim"]);

    const body = JSON.stringify(credit("acct_ack_counted", 1));
    const forged = await app.fetch(
      new Request("https://receiver.test/webhooks/demo", {
        method: "POST",
        body,
        headers: { ...signDemo("msg_ack_forged", body), "webhook-signature": "v1,AAAA" },
      }),
      counted,
    );
    expect(forged.status).toBe(401);
    expect(calls).toEqual(["claim", "claim"]);
    expect(await shardClaim("demo", "msg_ack_forged")).toBeNull();
  });
});
