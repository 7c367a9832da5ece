import type { BenchFlags } from "./flags.ts";
import { startForwardBackend } from "./forward-backend.ts";
import { type PhaseContext, startMeteredRuntime } from "./happy-path.ts";
import { Sender } from "./sender.ts";
import { deploymentWithSource, type ReceiverDeployment } from "./setup.ts";
import { ReceiptStore } from "./store.ts";
import { waitUntilFinished } from "./wait.ts";

const HELD_SOURCE = "held_work";
const HELD_PORT_OFFSET = 8;
const RATE = 5;

/** One controlled route's pace through a backlog, from what its destination received. */
export interface HeldRoutePace {
  route: string;
  limit: string;
  received: number;
  /** From the first arrival to the last. */
  seconds: number;
  /** Arrivals after the first, per second between the first and the last. */
  perSecond: number;
}

function paceOf(route: string, limit: string, arrivals: readonly number[]): HeldRoutePace {
  const sorted = [...arrivals].sort((a, b) => a - b);
  const seconds = sorted.length > 1 ? (sorted.at(-1)! - sorted[0]!) / 1000 : Number.NaN;
  return { route, limit, received: sorted.length, seconds, perSecond: (sorted.length - 1) / seconds };
}

/**
 * `--only held`: held work at the speed its limits allow. One source with two forward routes to a local backend that
 * answers at once, `rate` with rate_limit = "5/s" and `capped` with max_in_flight = 1, each given a backlog of
 * --held-events at once; the pace is read from the backend's arrival times.
 */
export async function heldWorkPhase(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  stateDir: string,
  context: PhaseContext,
): Promise<{ routes: HeldRoutePace[] }> {
  const backend = await startForwardBackend();
  const origin = `http://127.0.0.1:${backend.port}`;
  const runtime = await startMeteredRuntime(
    context,
    deploymentWithSource(deployment, "held", HELD_SOURCE, {
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET"],
      routes: [
        { name: "rate", destination: `${origin}/rate`, rate_limit: `${RATE}/s` },
        { name: "capped", destination: `${origin}/capped`, max_in_flight: 1 },
      ],
    }),
    stateDir,
    "held",
    HELD_PORT_OFFSET,
  );
  try {
    console.log(
      `\n== held work: a backlog of ${flags.heldEvents} events at once to a route with rate_limit = "${RATE}/s" and one with max_in_flight = 1, destination answering at once`,
    );
    const sender = new Sender({
      origin: runtime.origin,
      path: `/webhooks/${HELD_SOURCE}`,
      secret: deployment.demoSecret,
      maxSockets: 16,
    });
    await Promise.all(
      Array.from({ length: flags.heldEvents }, async (_, n) => {
        const body = JSON.stringify({ type: "account.credited", data: { account: `held_${n}`, amount: 1 } });
        for (;;) {
          const outcome = await sender.deliver(`held_evt_${n}`, body);
          if (outcome.status !== "error" && outcome.status >= 200 && outcome.status < 300) return;
        }
      }),
    );
    sender.close();
    await waitUntilFinished(new ReceiptStore(runtime.options.persistDir), "held_evt_", flags.heldEvents, {
      origin: () => runtime.origin,
      deliveries: true,
      stallMs: 180_000,
    });
    const arrivals = (path: string) =>
      backend
        .seen()
        .filter((seen) => seen.path === path)
        .map((seen) => seen.at);
    const routes = [
      paceOf("rate", `rate_limit = "${RATE}/s"`, arrivals("/rate")),
      paceOf("capped", "max_in_flight = 1", arrivals("/capped")),
    ];
    console.log(
      `${"route".padEnd(8)}${"limit".padEnd(24)}${"received".padStart(9)}${"seconds".padStart(9)}${"per s".padStart(8)}`,
    );
    for (const route of routes)
      console.log(
        `${route.route.padEnd(8)}${route.limit.padEnd(24)}${String(route.received).padStart(9)}${route.seconds.toFixed(1).padStart(9)}${route.perSecond.toFixed(2).padStart(8)}`,
      );
    return { routes };
  } finally {
    await runtime.stop();
    await backend.close();
  }
}
