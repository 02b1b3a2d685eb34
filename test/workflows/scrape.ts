/**
 * A worker's `/metrics` read as samples, for the metrics tests: the soak's parser (bench/soak/scrape.ts), so the
 * format is read in one place.
 */
export { rise, scrape, Scrape } from '../../bench/soak/scrape';
