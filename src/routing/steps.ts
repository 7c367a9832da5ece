/**
 * Work on a signed body in the consumer is bounded by counted steps, never by a clock (a deployed Worker's
 * `Date.now()` does not advance while code runs, so a time budget read from it never fires). A step is a small
 * unit of work: one JSONata evaluation, one item of a sequence it builds, a built-in's input read once. What a
 * step costs in CPU differs by kind, but each kind is linear in its steps, so a budget of steps bounds the work.
 */

/** What a route's schema, headers and transform may spend on one event, together. */
export const MAX_ROUTE_STEPS = 250_000;

export class StepBudgetExceeded extends Error {
  constructor(readonly limit: number) {
    super(`it took more than ${limit} steps on this event (the bound on a route's work per event)`);
  }
}

export class StepMeter {
  #steps = 0;

  constructor(readonly limit: number) {}

  get steps(): number {
    return this.#steps;
  }

  /** Counts `steps` more, and stops the evaluation (by throwing) once the total is past the limit. */
  charge(steps: number): void {
    this.#steps += steps;
    if (this.#steps > this.limit) throw new StepBudgetExceeded(this.limit);
  }
}
