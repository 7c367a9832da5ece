import { inject } from "vitest";

/** The key stand-in's origin (test/setup/global/key-standin.ts, which provides it on the Node side). */
declare module "vitest" {
  export interface ProvidedContext {
    keyStandinOrigin: string;
  }
}

export function keyStandinOrigin(): string {
  return inject("keyStandinOrigin");
}
