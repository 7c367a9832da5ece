/** jsonata's minified build has the same exports as its main module (jsonata.d.ts describes both). */
declare module "jsonata/jsonata.min.js" {
  import jsonata from "jsonata";
  export default jsonata;
}
