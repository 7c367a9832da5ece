import { writeFileSync } from "node:fs";
import type { BenchFlags } from "./flags.ts";
import type { SoakResult } from "./soak.ts";

/**
 * --json: every phase's result under `results` (meters, simulation, cost, crash, poison, performance, soak, as
 * far as they ran), the flags and the failures, with the figures scripts read most standing at the top.
 */
export function writeResultsFile(
  path: string,
  flags: BenchFlags,
  results: Record<string, unknown>,
  failures: readonly string[],
): void {
  // The meters phase's figures stand at the top ({perEvent, usdPerMillion}), so a script can read them directly.
  const meters = results.meters as
    | { perEvent?: unknown; usdPerMillion?: number; allIn?: { allInUsdPerMillion: number } }
    | undefined;
  const soakResult = results.soak as SoakResult | undefined;
  const top = {
    ...(meters
      ? {
          perEvent: meters.perEvent,
          usdPerMillion: meters.usdPerMillion,
          // --meters-after-only measures no demo source: its figures are under meters.after.
          allInUsdPerMillion: meters.allIn?.allInUsdPerMillion,
        }
      : {}),
    // The soak's samples, verdict and losses stand at the top too: {"samples": [...], "steady": …, "lost": 0}.
    // With --faults, also {faults: [{kind, startedAt, durationS, ackFailures, backlogPeak, drainedAfterS, …}]}.
    ...(soakResult
      ? {
          samples: soakResult.samples,
          steady: soakResult.steady,
          lost: soakResult.lost,
          duplicates: soakResult.duplicated,
          unfinished: soakResult.unfinished,
          dead: soakResult.dead,
        }
      : {}),
    ...(soakResult && soakResult.faults.length > 0 ? { faults: soakResult.faults } : {}),
  };
  writeFileSync(
    path,
    JSON.stringify({ ...top, flags: { ...flags, phases: [...flags.phases] }, results, failures }, null, 2),
  );
}
