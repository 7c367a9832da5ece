import type { DeliveryControl } from "../gate/control";
import { parseJsonBody } from "../providers/json";
import { bodyBoundProblem } from "./body-bounds";
import type { EventFilter, FilterSubject } from "./filter";
import type { RouteOrdering } from "./ordering";
import type { EventSchema } from "./schema";
import { MAX_ROUTE_STEPS, StepBudgetExceeded, StepMeter } from "./steps";
import type { EventHeaders, EventTransform } from "./transform";

/**
 * What a route does with one event before its destination sees it, as a pure function of the route and the
 * stored event: filter (does the route want it?), schema (is the body what the route expects?), transform (what
 * the route is given). The destination itself is the consumer's business (src/consumers/attempt/run-destination.ts).
 */

export interface RouteRules {
  /** `default` for a source that names its destination directly. */
  name: string;
  filter: EventFilter | null;
  schema: EventSchema | null;
  transform: EventTransform | null;
  /** Extra headers a forward sends, each computed per event (forward routes only). */
  headers: EventHeaders | null;
  /** Rate limit, in-flight limit, circuit breaker, pause (src/gate/): null when it sets none, and the gate is never asked. */
  control: DeliveryControl | null;
  /** `ordered_by` and `on_dead` (src/routing/ordering.ts): null when unordered, and nothing is read to order it. */
  ordering: RouteOrdering | null;
}

/** What the route has of an event: the stored bytes and identity, exactly as the receipt holds them. */
export interface RoutedEvent {
  body: Uint8Array;
  /** The receipt's kept headers, as stored (a JSON object of lower-case names), or null. */
  keptHeaders: string | null;
  eventType: string | null;
  subjectId: string | null;
}

export type RouteVerdict =
  /** The filter does not want the event: nothing is sent, and nothing is wrong. */
  | { kind: "skip"; reason: string }
  /** The event cannot be given to this route as configured: a dead letter, replayable once config is fixed. */
  | { kind: "refuse"; error: string }
  /**
   * Deliver; `transformed` is null when the route has no transform (the original bytes go, untouched), `headers`
   * when it sets none.
   */
  | {
      kind: "deliver";
      transformed: { body: Uint8Array; value: unknown } | null;
      headers: Record<string, string> | null;
    };

const DELIVER_AS_STORED: RouteVerdict = { kind: "deliver", transformed: null, headers: null };

export function routeHasRules(rules: RouteRules): boolean {
  return rules.filter !== null || rules.schema !== null || rules.transform !== null || rules.headers !== null;
}

const textDecoder = new TextDecoder();

/** The event as filters, schemas and transforms read it: the body as JSON, or its text when it is not JSON. */
export function filterSubject(event: RoutedEvent): FilterSubject {
  const parsed = parseJsonBody(event.body);
  return {
    body: parsed === undefined ? textDecoder.decode(event.body) : parsed,
    headers: readHeaders(event.keptHeaders),
    type: event.eventType,
    subject: event.subjectId,
  };
}

function readHeaders(keptHeaders: string | null): Record<string, string> {
  if (!keptHeaders) return {};
  try {
    const parsed = JSON.parse(keptHeaders) as unknown;
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, string>) : {};
  } catch {
    return {};
  }
}

export async function applyRoute(rules: RouteRules, event: RoutedEvent): Promise<RouteVerdict> {
  // The happy path of a plain route reads nothing: no parse, no allocation.
  if (!routeHasRules(rules)) return DELIVER_AS_STORED;
  const subject = filterSubject(event);
  // Every rule's cost is bounded by the body's shape (src/routing/body-bounds.ts): past it, no rule runs.
  const overBound = bodyBoundProblem(subject.body);
  if (overBound) return { kind: "refuse", error: `body over the bounds of route ${rules.name}: ${overBound}` };
  // The filter, the schema, the headers and the transform share one budget of steps per event.
  const meter = new StepMeter(MAX_ROUTE_STEPS);
  let wanted: boolean;
  try {
    wanted = rules.filter ? rules.filter(subject, meter) : true;
  } catch (error) {
    if (!(error instanceof StepBudgetExceeded)) throw error;
    return { kind: "refuse", error: `filter stopped on route ${rules.name}: ${error.message}` };
  }
  if (!wanted) return { kind: "skip", reason: `filtered out by route ${rules.name}` };
  if (rules.schema) {
    const verdict = rules.schema.check(subject.body, meter);
    if (!verdict.ok) {
      const what = verdict.stopped ? "schema check stopped" : "schema mismatch";
      return { kind: "refuse", error: `${what} on route ${rules.name}: ${verdict.errors.join("; ")}` };
    }
  }
  const bindings = { type: subject.type, subject: subject.subject, headers: subject.headers };
  let headers: Record<string, string> | null = null;
  if (rules.headers) {
    const computed = await rules.headers.run(subject.body, bindings, meter);
    if (!computed.ok) return { kind: "refuse", error: computed.error };
    headers = computed.headers;
  }
  if (!rules.transform) return { kind: "deliver", transformed: null, headers };
  const transformed = await rules.transform.run(subject.body, bindings, meter);
  if (!transformed.ok) return { kind: "refuse", error: transformed.error };
  return { kind: "deliver", transformed: { body: transformed.body, value: transformed.value }, headers };
}

/** Every step of a route on one event, each run on its own (not stopping at the first no), for `cli route test`. */
export interface RouteExplanation {
  name: string;
  /** null when the route has no filter (it takes every event). */
  filterMatches: boolean | null;
  schema: { ok: true } | { ok: false; errors: string[] } | null;
  transform: { ok: true; output: unknown } | { ok: false; error: string } | null;
  /** What the consumer would do: the same function it runs. */
  verdict: RouteVerdict;
}

export async function explainRoute(rules: RouteRules, event: RoutedEvent): Promise<RouteExplanation> {
  const subject = filterSubject(event);
  const transformed = rules.transform
    ? await rules.transform.run(subject.body, {
        type: subject.type,
        subject: subject.subject,
        headers: subject.headers,
      })
    : null;
  return {
    name: rules.name,
    filterMatches: rules.filter ? rules.filter(subject) : null,
    schema: rules.schema ? rules.schema.check(subject.body) : null,
    transform:
      transformed === null
        ? null
        : transformed.ok
          ? { ok: true, output: transformed.value }
          : { ok: false, error: transformed.error },
    verdict: await applyRoute(rules, event),
  };
}
