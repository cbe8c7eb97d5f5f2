// ModuleTreeModel: the model's module tree for a QTreeView. Modules as vLLM names them; each port
// is a child row with its gathered shape and shard kind; the tooltip lists parameter shards.
// Plain data nodes behind a thin QAbstractItemModel adapter.
#pragma once

#include <QAbstractItemModel>
#include <memory>
#include <vector>

#include "core/engine/engine_types.h"
#include "core/engine/port_probe.h"
#include "script_builder.h"

namespace shardscope::ui {

class ModuleTreeModel : public QAbstractItemModel {
  Q_OBJECT
 public:
  enum Column { NameColumn, ShapeColumn, KindColumn, ColumnCount };
  // LayerRole: the decoder layer of the row's module (ModuleInfo::layer), -1 outside the layers.
  enum Role { PortRole = Qt::UserRole + 1, ShardKindRole, ModulePathRole, LayerRole };

  explicit ModuleTreeModel(QObject* parent = nullptr);
  ~ModuleTreeModel() override;

  // Replaces the tree (empty `model` clears it). `shapes` come from a port probe.
  void setModel(const ModelInfo& model, const std::vector<PortShape>& shapes);

  // The port at `index`, if it is a port row.
  bool portAt(const QModelIndex& index, PortRef* port, std::string* shardKind = nullptr) const;
  QModelIndex indexOfPort(const std::string& module, const std::string& port) const;
  QModelIndex indexOfModule(const std::string& module) const;

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

 private:
  struct Node;
  Node* nodeFor(const QModelIndex& index) const;
  QModelIndex indexFor(const Node* node) const;
  std::unique_ptr<Node> root_;
};

}  // namespace shardscope::ui
