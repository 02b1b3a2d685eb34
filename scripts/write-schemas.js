#!/usr/bin/env node
// The JSON Schemas of the workflows' inputs, written from the build (lib/) into lib/schemas/, which the package ships
// (`tuneflow-temporal/schemas/<workflow>.json`). Needs only lib/: the Dockerfile's build stage has no bin/.
const path = require('node:path');
const { writeSchemas } = require('../lib/cli/schema');

writeSchemas(path.join(__dirname, '..', 'lib', 'schemas'));
