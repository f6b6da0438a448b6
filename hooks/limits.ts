// Bounds on what one team's CR can make the shared hook service do. Defaults are generous
// for real profiles and small enough that a hostile one cannot stall or exhaust the process.
export interface ExpressionLimits {
  /** Characters in one CEL or JSONPath expression. */
  maxExpressionLength: number
  /** Attributes in one profile. */
  maxAttributes: number
  /** Nesting depth of CEL comprehension macros (map/filter/all/exists…); bounds polynomial blow-up. */
  maxMacroDepth: number
  /** CEL syntax tree nodes per expression. */
  maxAstNodes: number
  /** Bytes of canonical JSON one item's attributes may take. */
  maxItemBytes: number
  /** Bytes of canonical JSON all items of one target sync may take. */
  maxRequestItemBytes: number
  /** Nesting of objects and arrays in a request body; real objects stay under 40. */
  maxJsonDepth: number
  /**
   * Characters (or bytes) of one string a CEL expression reads or builds, and the size of one
   * object's attribute values (elements plus characters) before they are serialised. Kubernetes
   * objects stay under 1.5 MiB, so real profiles never get near it; doubling bombs do within
   * about 20 steps.
   */
  maxStringLength: number
  /** Elements of one list a CEL expression reads or builds (split, +, map, filter…). */
  maxListLength: number
}

export const DEFAULT_LIMITS: ExpressionLimits = {
  maxExpressionLength: 4096,
  maxAttributes: 128,
  maxMacroDepth: 2,
  maxAstNodes: 2000,
  maxItemBytes: 64 * 1024,
  // The exporter's default namespace share: a larger output could never be held there, and the
  // hooks would hold it in memory only to have it refused.
  maxRequestItemBytes: 192 * 1024 * 1024,
  maxJsonDepth: 512,
  maxStringLength: 4 * 1024 * 1024,
  maxListLength: 1024 * 1024,
}

/**
 * A value outgrew a runtime bound. Unlike an ordinary evaluation error it is not the object's
 * problem but the profile's: the whole target sync stops with Ready=False ResourceLimit, and
 * the exporter keeps the target's last items.
 */
export class ResourceLimitError extends Error {}
