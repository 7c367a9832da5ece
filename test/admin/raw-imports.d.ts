/** Vite's ?raw suffix: a file's text, so tests run the exact SQL the docs show. */
declare module "*.md?raw" {
  const text: string;
  export default text;
}

declare module "*.toml?raw" {
  const text: string;
  export default text;
}

declare module "*.example?raw" {
  const text: string;
  export default text;
}
