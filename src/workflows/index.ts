/**
 * The tuneflow workflows: the worker's `workflowsPath`. Other services start them by these names.
 */
export { trainThenGenerate } from './trainThenGenerate';
export { generate } from './generate';
export { packTune } from './packTune';
