import { env } from "cloudflare:workers";
import { shardsOf } from "../../src/claims/routing";
import type { ClaimShard } from "../../src/claims/shard";
import { type MeterTotals, meterReading, sumReadings } from "../../src/lib/meter";
import { allShards } from "./storage";

/**
 * The billed units counted so far, as collectMeters (src/admin/stats/meters.ts) counts them, read from the Worker's
 * isolate, every claim shard of `sources` and every other shard that exists. collectMeters asks every shard of
 * every configured source; with all the fixture sources that is some two thousand Durable Objects, each created
 * (and from then on polled by every settle() of the file) only to answer zero: a budget test paid minutes for it.
 * A shard that did any of the test's work exists, so none of its units are missed; the named sources' shards are
 * created here, before the work, so that a shard's own creation is never counted as the work's.
 */
export async function meterTotals(...sources: string[]): Promise<MeterTotals> {
  const byId = new Map<string, DurableObjectStub<ClaimShard>>();
  for (const stub of sources.flatMap((source) => shardsOf(env, source))) byId.set(stub.id.toString(), stub);
  for (const stub of await allShards()) byId.set(stub.id.toString(), stub);
  const readings = [meterReading(), ...(await Promise.all([...byId.values()].map((stub) => stub.meters())))];
  return sumReadings(readings);
}
