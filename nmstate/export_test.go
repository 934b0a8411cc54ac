package nmstate

// SeedTemplate lets the external test package compare the seed template with
// internal/testutil/node's.
const SeedTemplate = seedTemplate
