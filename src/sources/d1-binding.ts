/**
 * A binding is a D1 database when it is the runtime's D1Database. The class name is checked, not just the
 * methods: an RPC stub (a service binding, a Durable Object namespace's stub) answers every property name with a
 * function, so `prepare` and `batch` alone would take one for a database.
 */
export function isD1Database(value: unknown): value is D1Database {
  if (typeof value !== "object" || value === null) return false;
  const candidate = value as { constructor?: { name?: unknown }; prepare?: unknown; batch?: unknown };
  return (
    candidate.constructor?.name === "D1Database" &&
    typeof candidate.prepare === "function" &&
    typeof candidate.batch === "function"
  );
}

/** Whether this Worker has a D1 database bound under `binding` (a source's `database` must name one). */
export function hasD1Binding(env: object, binding: string): boolean {
  return isD1Database((env as Record<string, unknown>)[binding]);
}
