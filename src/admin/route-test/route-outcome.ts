import { applyRoute, type RoutedEvent } from "../../routing/route";
import type { Destination, SourceRoute } from "../../sources/config";

/**
 * What one route would do with one stored event, by the consumer's own function (applyRoute, the same step budget),
 * put the way `route test --last` reports it. Nothing is sent: a destination is only named, never called.
 */

/** An output past this many bytes is counted in the answer, not copied into it (a transform may make 256 KB). */
export const MAX_LISTED_OUTPUT_BYTES = 16 * 1024;

export type RouteOutcome =
  | {
      kind: "match";
      /** "original": the stored bytes go as they are (no transform); "transform": the transform's output goes. */
      sends: "original" | "transform";
      /** The transform's output, when it is at most MAX_LISTED_OUTPUT_BYTES as JSON. */
      output?: unknown;
      outputBytes?: number;
      headers: Record<string, string> | null;
    }
  | { kind: "skipped"; reason: string }
  | { kind: "would_die"; error: string };

export interface EvaluatedOutcome {
  outcome: RouteOutcome;
  /** Equal for two outcomes exactly when the destination would be handed the same thing (the bytes, not a re-serialization). */
  comparable: string;
}

const textDecoder = new TextDecoder();

/** As the consumer decides (src/consumers/attempt/run-destination.ts): a route without a destination skips before its rules run. */
export async function routeOutcome(route: SourceRoute, event: RoutedEvent): Promise<EvaluatedOutcome> {
  if (route.destination.kind === "none") return described({ kind: "skipped", reason: "the route has no destination" });
  const verdict = await applyRoute(route.rules, event);
  if (verdict.kind === "skip") return described({ kind: "skipped", reason: verdict.reason });
  if (verdict.kind === "refuse") return described({ kind: "would_die", error: verdict.error });
  if (!verdict.transformed)
    return described({ kind: "match", sends: "original", headers: verdict.headers }, "original bytes");
  const { body, value } = verdict.transformed;
  const outcome: RouteOutcome = {
    kind: "match",
    sends: "transform",
    ...(body.byteLength <= MAX_LISTED_OUTPUT_BYTES ? { output: value } : { outputBytes: body.byteLength }),
    headers: verdict.headers,
  };
  return described(outcome, textDecoder.decode(body));
}

function described(outcome: RouteOutcome, sent: string | null = null): EvaluatedOutcome {
  const { kind } = outcome;
  const why = outcome.kind === "skipped" ? outcome.reason : outcome.kind === "would_die" ? outcome.error : null;
  const headers = outcome.kind === "match" ? outcome.headers : null;
  return { outcome, comparable: JSON.stringify([kind, why, sent, headers]) };
}

/** A destination as the config spells it: the URL, `handler:<name>`, `listen:<name>` or `none`. */
export function destinationText(destination: Destination): string {
  switch (destination.kind) {
    case "forward":
      return destination.url;
    case "handler":
      return `handler:${destination.handlerName}`;
    case "listen":
      return `listen:${destination.listenName}`;
    case "none":
      return "none";
  }
}
