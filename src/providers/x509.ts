// @peculiar/x509 resolves its parsers through a container that needs the Reflect metadata API, which workerd does
// not have; the polyfill must be evaluated before the library, so every use of it imports it from here.
import "@abraham/reflection";

export { SubjectAlternativeNameExtension, X509Certificate, X509CertificateGenerator } from "@peculiar/x509";
