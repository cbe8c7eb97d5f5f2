// Thin RAII wrappers over the SQLite C API: a connection, a prepared statement and a
// transaction. Every failure throws StoreError naming the database file and the SQLite message.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store_error.h"

namespace shardscope::store {

class SqliteStatement;

class SqliteDatabase {
 public:
  enum class Mode { ReadOnly, ReadWrite, ReadWriteCreate };
  SqliteDatabase(const std::filesystem::path& path, Mode mode, int busyTimeoutMs);

  sqlite3* handle() const { return db_.get(); }
  const std::filesystem::path& path() const { return path_; }

  void exec(const std::string& sql);
  SqliteStatement prepare(std::string_view sql);
  // Throws StoreError for a non-OK result code, with `what` and SQLite's message.
  void check(int rc, const std::string& what) const;
  int64_t lastInsertId() const { return sqlite3_last_insert_rowid(db_.get()); }

 private:
  struct Close {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  };
  std::filesystem::path path_;
  std::unique_ptr<sqlite3, Close> db_;
};

class SqliteStatement {
 public:
  SqliteStatement(const SqliteDatabase& db, std::string_view sql);

  // Binds are 1-based like SQLite's; blobs and texts are copied only when `copy` is set.
  SqliteStatement& bind(int i, int64_t v);
  SqliteStatement& bind(int i, double v);
  SqliteStatement& bind(int i, const std::string& v);
  SqliteStatement& bindBlob(int i, const void* data, size_t bytes);
  SqliteStatement& bindNull(int i);

  bool step();  // true while a row is available
  void run();   // steps a statement that returns no rows
  void reset();

  bool isNull(int col) const;
  int64_t integer(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  std::string_view blob(int col) const;
  std::vector<std::byte> bytes(int col) const;  // a copy of a blob column

 private:
  struct Finalize {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  const SqliteDatabase* db_;
  std::unique_ptr<sqlite3_stmt, Finalize> stmt_;
};

// BEGIN on construction, ROLLBACK on destruction unless commit() ran.
class SqliteTransaction {
 public:
  enum class Kind { Deferred, Immediate };
  SqliteTransaction(SqliteDatabase& db, Kind kind);
  ~SqliteTransaction();
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;
  void commit();

 private:
  SqliteDatabase& db_;
  bool open_ = true;
};

}  // namespace shardscope::store
