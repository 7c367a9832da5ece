import { shardsOf } from "../../claims/routing";
import { type MeterTotals, meterReading, sumReadings } from "../../lib/meter";
import { loadSources } from "../../sources/registry";

/**
 * Billed units counted so far by every isolate this deployment can reach: the Worker's own and each claim
 * shard's (which locally may share an isolate with it; each isolate is added once). Counters are per isolate and
 * start at zero when it does, so callers compare two readings rather than trust one.
 *
 * @example
 * const before = await collectMeters(env);
 * // … send events, wait until processed …
 * const spent = difference((await collectMeters(env)).totals, before.totals);
 */
export async function collectMeters(env: Env): Promise<{ totals: MeterTotals; isolates: number }> {
  const stubs = [...loadSources(env).values()].flatMap((source) => shardsOf(env, source));
  const readings = [meterReading(), ...(await Promise.all(stubs.map((stub) => stub.meters())))];
  return { totals: sumReadings(readings), isolates: new Set(readings.map((reading) => reading.isolateId)).size };
}
