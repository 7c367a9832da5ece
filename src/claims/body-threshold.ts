import { DEFAULT_R2_BODY_THRESHOLD, r2BodyThreshold } from "../sources/body-threshold";
import { lookupSource } from "../sources/registry";

/** Each source's threshold by name, for the relay; a source no longer configured gets the default. */
export function bodyThresholdOf(env: Pick<Env, "SOURCES">): (source: string) => number {
  return (name) => {
    const found = lookupSource(env, name);
    return found.kind === "valid"
      ? r2BodyThreshold(found.source.options as Record<string, unknown>)
      : DEFAULT_R2_BODY_THRESHOLD;
  };
}
