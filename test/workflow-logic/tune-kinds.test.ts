import { ApplicationFailure } from '@temporalio/common';
import {
  isFaceIdTune,
  isFluxLoraTune,
  isTuneTrained,
  loraPromptText,
  promptsOutlivingTune,
  promptTarget,
} from '../../src/workflows/tune-kinds';

describe('tune kinds', () => {
  test('a FaceID tune is trained from the start', () => {
    expect(isFaceIdTune({ model_type: 'faceid' })).toBe(true);
    expect(isFaceIdTune({ model_type: 'lora' })).toBe(false);
    expect(isTuneTrained({ model_type: 'faceid', trained_at: null })).toBe(true);
  });

  test('other tunes are trained once trained_at is set', () => {
    expect(isTuneTrained({ model_type: null, trained_at: null })).toBe(false);
    expect(isTuneTrained({ model_type: undefined, trained_at: undefined })).toBe(false);
    expect(isTuneTrained({ model_type: 'lora', trained_at: '2025-01-01T00:00:00.000Z' })).toBe(true);
  });

  test('a Flux LoRA is a LoRA on the flux1 branch; other LoRAs and Flux checkpoints are not', () => {
    expect(isFluxLoraTune({ model_type: 'lora', branch: 'flux1' })).toBe(true);
    expect(isFluxLoraTune({ model_type: 'lora', branch: 'sd15' })).toBe(false);
    expect(isFluxLoraTune({ model_type: null, branch: 'flux1' })).toBe(false);
    expect(isFluxLoraTune({ model_type: 'faceid', branch: 'flux1' })).toBe(false);
  });
});

describe('loraPromptText', () => {
  test('prepends <lora:ID:1> to the text', () => {
    expect(loraPromptText(123456, 'ohwx woman, studio portrait')).toBe('<lora:123456:1> ohwx woman, studio portrait');
    expect(loraPromptText(7, 'ohwx man', 0.8)).toBe('<lora:7:0.8> ohwx man');
  });

  test('applying it twice changes nothing; a text that loads the LoRA already is kept', () => {
    const once = loraPromptText(123, 'ohwx woman');
    expect(loraPromptText(123, once)).toBe(once);
    expect(loraPromptText(123, 'ohwx woman <lora:123:0.6>')).toBe('ohwx woman <lora:123:0.6>');
    // Another LoRA in the text does not count as this one.
    expect(loraPromptText(123, '<lora:1234:1> x')).toBe('<lora:123:1> <lora:1234:1> x');
  });
});

describe('promptTarget', () => {
  test('a tune takes its own prompts, text unchanged', () => {
    const target = promptTarget({ id: 5, model_type: null, branch: 'sd15', base_tune_id: null });
    expect(target.tuneId).toBe(5);
    expect(target.textFor('sks dog')).toBe('sks dog');
  });

  test("a Flux LoRA's prompts go to its base tune, with the LoRA in the text", () => {
    const target = promptTarget({ id: 77, model_type: 'lora', branch: 'flux1', base_tune_id: 1504944 });
    expect(target.tuneId).toBe(1504944);
    expect(target.textFor('ohwx woman')).toBe('<lora:77:1> ohwx woman');
  });

  test('any LoRA on a base tune generates on the base; a LoRA without one posts to itself', () => {
    expect(promptTarget({ id: 8, model_type: 'lora', branch: 'sd15', base_tune_id: 690204 }).tuneId).toBe(690204);
    const alone = promptTarget({ id: 8, model_type: 'lora', branch: 'sd15', base_tune_id: null });
    expect(alone.tuneId).toBe(8);
    expect(alone.textFor('sks dog')).toBe('sks dog');
  });

  test('prompts on a tune of branch fast are free (spec 1); on any other branch, or on a base tune, they are priced', () => {
    expect(promptTarget({ id: 5, model_type: null, branch: 'fast', base_tune_id: null }).free).toBe(true);
    expect(promptTarget({ id: 5, model_type: null, branch: 'sd15', base_tune_id: null }).free).toBe(false);
    expect(promptTarget({ id: 5, model_type: null, branch: undefined, base_tune_id: null }).free).toBe(false);
    // A LoRA trained on fast still posts to its base tune, whose branch is not known here.
    expect(promptTarget({ id: 8, model_type: 'lora', branch: 'fast', base_tune_id: 690204 }).free).toBe(false);
  });

  test('a Flux LoRA without a base tune fails at once, typed', () => {
    let failure: unknown;
    try {
      promptTarget({ id: 77, model_type: 'lora', branch: 'flux1', base_tune_id: null });
    } catch (err) {
      failure = err;
    }
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect((failure as ApplicationFailure).type).toBe('MissingBaseTune');
    expect((failure as ApplicationFailure).nonRetryable).toBe(true);
    expect((failure as ApplicationFailure).message).toContain('Tune 77');
  });
});

describe('promptsOutlivingTune', () => {
  const onTune = { id: 1, tune_id: 7 };
  const onBase = { id: 2, tune_id: 1504944 };

  test('deleting a checkpoint takes its prompts along: only prompts elsewhere remain to delete', () => {
    expect(promptsOutlivingTune([onTune, onBase], 7, { id: 7, model_type: null })).toEqual([onBase]);
  });

  test('a LoRA, a tune of unknown type, or no deleted tune: every prompt is deleted on its own', () => {
    expect(promptsOutlivingTune([onTune, onBase], 7, { id: 7, model_type: 'lora' })).toEqual([onTune, onBase]);
    expect(promptsOutlivingTune([onTune], 7, { id: 7, model_type: undefined })).toEqual([onTune]);
    expect(promptsOutlivingTune([onTune], undefined, { id: 7, model_type: null })).toEqual([onTune]);
  });
});
