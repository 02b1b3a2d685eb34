# The tuneflow worker (and the mock service): a glibc Node 20 image, since Temporal's native worker ships glibc
# binaries. The build stage compiles TypeScript and prebuilds the workflow bundle; the runtime stage has production
# dependencies only and runs as `node` (the Temporal SDK is a peer dependency, which `npm ci` installs with them).
# `npm ci` builds nothing (the package builds when packed): the build stage installs before it copies the sources (a
# layer kept while only sources change), the runtime has no tsc.
# test/deploy/image.test.ts replays these stages as written.
FROM node:20.19-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts ./scripts
RUN npm run build

FROM node:20.19-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY --from=build /app/lib ./lib
COPY bin ./bin
USER node
# Callback receiver, Prometheus metrics.
EXPOSE 3001 9464
ENTRYPOINT ["node", "lib/cli/index.js"]
CMD ["worker"]
