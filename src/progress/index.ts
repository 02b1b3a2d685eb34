/** The progress stream a web app mounts, its read tokens, and the page that shows it. */
export {
  progressStream,
  PROGRESS_TOKEN_COOKIE,
  type ProgressStream,
  type ProgressStreamLimits,
  type ProgressStreamOptions,
  type ProgressStreamStats,
} from './stream';
export { mintProgressToken, checkProgressToken, type MintProgressTokenOptions, type TokenRefusal } from './tokens';
export type { ProgressView, ViewedImage, RunStatus } from './watch';
export { progressPageHtml, type ProgressPageOptions } from './page';
