// The session file's schema: an ordered list of migrations. `PRAGMA user_version` holds how many
// have been applied and `PRAGMA application_id` marks the file as ShardScope's.
#pragma once

#include <cstdint>

#include "sqlite_database.h"

namespace shardscope::store {

constexpr int32_t kApplicationId = 0x53534350;  // "SSCP"

// The schema version this build writes (the number of migrations).
int schemaVersion();

// The file's schema version (0 for an empty file).
int fileSchemaVersion(SqliteDatabase& db);

// Brings the file up to `toVersion` in one write transaction (so two processes opening a new file
// at once migrate it once); tests pass a lower `toVersion` to make files of older builds.
void migrate(SqliteDatabase& db, int toVersion = schemaVersion());

}  // namespace shardscope::store
