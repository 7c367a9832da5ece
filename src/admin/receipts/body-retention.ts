import { bodyDropsAt } from "../../reconcile/retention-scan";
import { SourceConfigError } from "../../sources/config";
import { lookupSource } from "../../sources/registry";

/** When this receipt's body goes, under its source's retention as configured now (null: see bodyDropsAt). */
export function bodyDropsAtFor(
  env: { SOURCES?: Env["SOURCES"] },
  receipt: { source: string; status: string; receivedAt: number; bodyRetained: boolean },
): number | null {
  return bodyDropsAt(
    receipt,
    env.SOURCES === undefined ? null : retentionOf(env as Pick<Env, "SOURCES">, receipt.source),
  );
}

function retentionOf(env: Pick<Env, "SOURCES">, source: string) {
  try {
    const found = lookupSource(env, source);
    return found.kind === "valid" ? found.source : null;
  } catch (error) {
    // SOURCES itself unreadable: no source is configured, so no retention runs.
    if (error instanceof SourceConfigError) return null;
    throw error;
  }
}
