// The lines the type-check service writes on stdout (service.mjs), parsed with zod by the client.
import { z } from 'zod';
import { ExportedApiSchema } from './api.ts';

/** One diagnostic as `tsc` would print it from the workspace root. */
export const DiagnosticSchema = z.object({
  /** Path relative to the workspace root (null for a global diagnostic). */
  file: z.string().nullable(),
  /** 1-based line and column (null for a global diagnostic). */
  line: z.number().int().positive().nullable(),
  col: z.number().int().positive().nullable(),
  /** The TSxxxx number. */
  code: z.number().int(),
  category: z.enum(['error', 'warning', 'suggestion', 'message']),
  message: z.string(),
});
export type TypecheckDiagnostic = z.infer<typeof DiagnosticSchema>;

/** A diagnostic the way `tsc --pretty false` prints it: `file(line,col): error TS2322: message`. */
export function tscStyle(d: TypecheckDiagnostic): string {
  const where = d.file === null ? '' : `${d.file}(${d.line},${d.col}): `;
  return `${where}${d.category} TS${d.code}: ${d.message}`;
}

export const ReadyLineSchema = z.object({
  type: z.literal('ready'),
  /** The TypeScript version the service runs. */
  typescript: z.string(),
  typescriptPath: z.string(),
  /** The tsconfig, relative to the workspace root. */
  tsconfig: z.string(),
  /** Files of the base program (sources, declarations, libs). */
  files: z.number().int().nonnegative(),
  /** False when this TypeScript exposes no module resolutions: every check then checks all files. */
  importGraph: z.boolean(),
  /** CPU the start took (parse, base program, full check), milliseconds. */
  cpuMs: z.number().nonnegative(),
});
export type ReadyLine = z.infer<typeof ReadyLineSchema>;

export const FatalLineSchema = z.object({ type: z.literal('fatal'), error: z.string() });

const Answered = z.object({
  type: z.literal('answer'),
  id: z.union([z.string(), z.number()]),
  status: z.enum(['passed', 'failed']),
  diagnostics: z.array(DiagnosticSchema),
  /** Every diagnostic (the list may be cut). */
  diagnosticCount: z.number().int().nonnegative(),
  /** Whether only the files the overlay can affect were checked, or all. */
  scope: z.enum(['affected', 'all']),
  checkedFiles: z.number().int().nonnegative(),
  allReason: z.string().optional(),
  api: ExportedApiSchema.nullable(),
  cpuMs: z.number().nonnegative(),
});
const Refused = z.object({
  type: z.literal('answer'),
  id: z.union([z.string(), z.number()]).nullable(),
  status: z.literal('error'),
  error: z.string(),
  cpuMs: z.number().nonnegative(),
});
export const AnswerLineSchema = z.discriminatedUnion('status', [
  Answered.extend({ status: z.literal('passed') }),
  Answered.extend({ status: z.literal('failed') }),
  Refused,
]);
export type AnswerLine = z.infer<typeof AnswerLineSchema>;

export const ServiceLineSchema = z.union([ReadyLineSchema, FatalLineSchema, AnswerLineSchema]);
export type ServiceLine = z.infer<typeof ServiceLineSchema>;
