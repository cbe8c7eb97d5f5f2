#include "sqlite_database.h"

namespace shardscope::store {

SqliteDatabase::SqliteDatabase(const std::filesystem::path& path, Mode mode, int busyTimeoutMs)
    : path_(path) {
  const int flags = mode == Mode::ReadOnly    ? SQLITE_OPEN_READONLY
                    : mode == Mode::ReadWrite ? SQLITE_OPEN_READWRITE
                                              : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  db_.reset(raw);  // sqlite3_open_v2 hands out a handle even on failure; it must be closed
  if (rc != SQLITE_OK) {
    throw StoreError("cannot open session file " + path.string() + ": " +
                     (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, busyTimeoutMs);
}

void SqliteDatabase::check(int rc, const std::string& what) const {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
  std::string hint;
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      hint = "; another program holds a write lock on it for too long, try again";
      break;
    case SQLITE_FULL:
      hint = "; the disk is full";
      break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      hint = "; the file is damaged";
      break;
    case SQLITE_READONLY:
      hint = "; the file or its folder is read-only";
      break;
    default:
      break;
  }
  throw StoreError(path_.string() + ": " + what + ": " + sqlite3_errmsg(db_.get()) + hint);
}

void SqliteDatabase::exec(const std::string& sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, &message);
  const std::string text = message ? message : "";
  sqlite3_free(message);
  if (rc != SQLITE_OK) check(rc, "'" + sql.substr(0, 60) + "' failed (" + text + ")");
}

SqliteStatement SqliteDatabase::prepare(std::string_view sql) {
  return SqliteStatement(*this, sql);
}

SqliteStatement::SqliteStatement(const SqliteDatabase& db, std::string_view sql) : db_(&db) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v2(db.handle(), sql.data(), int(sql.size()), &raw, nullptr);
  stmt_.reset(raw);
  db.check(rc, "preparing '" + std::string(sql.substr(0, 60)) + "'");
}

SqliteStatement& SqliteStatement::bind(int i, int64_t v) {
  db_->check(sqlite3_bind_int64(stmt_.get(), i, v), "binding");
  return *this;
}

SqliteStatement& SqliteStatement::bind(int i, double v) {
  db_->check(sqlite3_bind_double(stmt_.get(), i, v), "binding");
  return *this;
}

SqliteStatement& SqliteStatement::bind(int i, const std::string& v) {
  db_->check(sqlite3_bind_text64(stmt_.get(), i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
             "binding");
  return *this;
}

SqliteStatement& SqliteStatement::bindBlob(int i, const void* data, size_t bytes) {
  // SQLITE_STATIC: the caller keeps the bytes alive until the statement has stepped.
  db_->check(sqlite3_bind_blob64(stmt_.get(), i, bytes ? data : "", bytes, SQLITE_STATIC),
             "binding a value of " + std::to_string(bytes) + " bytes");
  return *this;
}

SqliteStatement& SqliteStatement::bindNull(int i) {
  db_->check(sqlite3_bind_null(stmt_.get(), i), "binding");
  return *this;
}

bool SqliteStatement::step() {
  const int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->check(rc, "running '" + std::string(sqlite3_sql(stmt_.get())).substr(0, 60) + "'");
  return false;
}

void SqliteStatement::run() {
  while (step()) {
  }
}

void SqliteStatement::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
}

bool SqliteStatement::isNull(int col) const {
  return sqlite3_column_type(stmt_.get(), col) == SQLITE_NULL;
}

int64_t SqliteStatement::integer(int col) const {
  return sqlite3_column_int64(stmt_.get(), col);
}

double SqliteStatement::real(int col) const {
  return sqlite3_column_double(stmt_.get(), col);
}

std::string SqliteStatement::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_.get(), col));
  return p ? std::string(p, size_t(sqlite3_column_bytes(stmt_.get(), col))) : std::string();
}

std::string_view SqliteStatement::blob(int col) const {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_.get(), col));
  return p ? std::string_view(p, size_t(sqlite3_column_bytes(stmt_.get(), col)))
           : std::string_view();
}

std::vector<std::byte> SqliteStatement::bytes(int col) const {
  const std::string_view b = blob(col);
  const auto* p = reinterpret_cast<const std::byte*>(b.data());
  return std::vector<std::byte>(p, p + b.size());
}

SqliteTransaction::SqliteTransaction(SqliteDatabase& db, Kind kind) : db_(db) {
  db_.exec(kind == Kind::Immediate ? "BEGIN IMMEDIATE" : "BEGIN");
}

SqliteTransaction::~SqliteTransaction() {
  if (open_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void SqliteTransaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

}  // namespace shardscope::store
