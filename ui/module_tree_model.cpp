#include "module_tree_model.h"

#include <QBrush>
#include <QColor>

namespace shardscope::ui {

struct ModuleTreeModel::Node {
  Node* parent = nullptr;
  int row = 0;
  std::string module;  // module path
  std::string name;    // shown name
  std::string kind;    // vLLM class (modules) or shard kind (ports)
  std::string port;    // "input"/"output" for port rows, empty for modules
  std::string shape;   // gathered shape (ports)
  std::string tooltip;
  int layer = -1;  // of the module (ModuleInfo::layer)
  bool tuple = false;
  std::vector<std::unique_ptr<Node>> children;

  Node* add(std::unique_ptr<Node> c) {
    c->parent = this;
    c->row = int(children.size());
    children.push_back(std::move(c));
    return children.back().get();
  }
};

namespace {

std::string shapeText(const std::vector<std::vector<int64_t>>& shapes, bool tuple) {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::string one = "[";
    for (size_t j = 0; j < shapes[i].size(); ++j)
      one += (j ? ", " : "") + std::to_string(shapes[i][j]);
    s += (i ? ", " : "") + (shapes[i].empty() ? std::string("None") : one + "]");
  }
  return tuple ? "(" + s + ")" : s;
}

QColor badgeColour(const std::string& kind) {
  if (kind == "column") return QColor(0x2e, 0x7d, 0x32);
  if (kind == "row") return QColor(0x15, 0x65, 0xc0);
  if (kind == "fused") return QColor(0x6a, 0x1b, 0x9a);
  if (kind == "head") return QColor(0xef, 0x6c, 0x00);
  if (kind == "partial") return QColor(0xc6, 0x28, 0x28);
  if (kind == "vocab") return QColor(0x00, 0x83, 0x8f);
  if (kind == "dcp-group") return QColor(0x6d, 0x4c, 0x41);  // split, each shard on dcp ranks
  return QColor(0x61, 0x61, 0x61);                           // whole
}

}  // namespace

ModuleTreeModel::ModuleTreeModel(QObject* parent)
    : QAbstractItemModel(parent), root_(std::make_unique<Node>()) {}

ModuleTreeModel::~ModuleTreeModel() = default;

void ModuleTreeModel::setModel(const ModelInfo& model, const std::vector<PortShape>& shapes) {
  beginResetModel();
  root_ = std::make_unique<Node>();
  std::vector<Node*> stack = {root_.get()};  // stack[d] = the last module at depth d - 1
  for (const ModuleInfo& m : model.modules) {
    stack.resize(size_t(m.depth) + 1);
    auto node = std::make_unique<Node>();
    node->module = m.path;
    node->name = m.name;
    node->kind = m.kind;
    node->layer = m.layer;
    node->tooltip = m.path + " (" + m.kind + ")";
    if (model.pp > 1 && m.stage >= 0) {  // pipeline stages: which one holds the module
      node->kind += " \u00b7 stage " + std::to_string(m.stage);
      node->tooltip +=
          "\nheld by pipeline stage " + std::to_string(m.stage) + " of " + std::to_string(model.pp);
    }
    for (const ParameterInfo& p : m.parameters) {
      node->tooltip += "\n." + p.name + ": shard " + shapeText({p.shardShape}, false) + " of " +
                       shapeText({p.fullShape}, false);
    }
    Node* added = stack.back()->add(std::move(node));
    for (const std::string port : {"input", "output"}) {
      for (const PortShape& s : shapes) {
        if (s.module != m.path || s.port != port) continue;
        auto p = std::make_unique<Node>();
        p->module = m.path;
        p->layer = m.layer;
        p->name = "." + port;
        p->port = port;
        p->kind = s.shardKind;
        p->shape = shapeText(s.whole, s.tuple);
        p->tuple = s.tuple;
        p->tooltip = m.path + "." + port + ": " + s.shardKind + "-sharded; rank 0 holds " +
                     shapeText(s.shard, s.tuple) + ", a read gives the whole " + p->shape;
        added->add(std::move(p));
        break;  // the first visit (prefill) is the one shown
      }
    }
    stack.push_back(added);
  }
  endResetModel();
}

ModuleTreeModel::Node* ModuleTreeModel::nodeFor(const QModelIndex& index) const {
  return index.isValid() ? static_cast<Node*>(index.internalPointer()) : root_.get();
}

QModelIndex ModuleTreeModel::indexFor(const Node* node) const {
  if (!node || node == root_.get()) return {};
  return createIndex(node->row, 0, const_cast<Node*>(node));
}

bool ModuleTreeModel::portAt(const QModelIndex& index, PortRef* port,
                             std::string* shardKind) const {
  const Node* n = index.isValid() ? nodeFor(index) : nullptr;
  if (!n || n->port.empty()) return false;
  if (port) *port = {n->module, n->port, n->tuple};
  if (shardKind) *shardKind = n->kind;
  return true;
}

QModelIndex ModuleTreeModel::indexOfPort(const std::string& module, const std::string& port) const {
  const QModelIndex m = indexOfModule(module);
  if (!m.isValid()) return {};
  for (const auto& c : nodeFor(m)->children) {
    if (c->port == port) return indexFor(c.get());
  }
  return {};
}

QModelIndex ModuleTreeModel::indexOfModule(const std::string& module) const {
  std::vector<const Node*> todo = {root_.get()};
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    if (n->port.empty() && n->module == module && n != root_.get()) return indexFor(n);
    for (const auto& c : n->children) todo.push_back(c.get());
  }
  return {};
}

QModelIndex ModuleTreeModel::index(int row, int column, const QModelIndex& parent) const {
  if (column < 0 || column >= ColumnCount || row < 0) return {};
  if (parent.isValid() && parent.column() != 0) return {};
  const Node* p = nodeFor(parent);
  if (row >= int(p->children.size())) return {};
  return createIndex(row, column, p->children[size_t(row)].get());
}

QModelIndex ModuleTreeModel::parent(const QModelIndex& child) const {
  if (!child.isValid()) return {};
  return indexFor(nodeFor(child)->parent);
}

int ModuleTreeModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid() && parent.column() != 0) return 0;
  return int(nodeFor(parent)->children.size());
}

int ModuleTreeModel::columnCount(const QModelIndex&) const {
  return ColumnCount;
}

QVariant ModuleTreeModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid()) return {};
  const Node* n = nodeFor(index);
  switch (role) {
    case Qt::DisplayRole:
      if (index.column() == NameColumn) return QString::fromStdString(n->name);
      if (index.column() == ShapeColumn) return QString::fromStdString(n->shape);
      return QString::fromStdString(n->kind);
    case Qt::ToolTipRole:
      return QString::fromStdString(n->tooltip);
    case Qt::ForegroundRole:
      if (index.column() == KindColumn && !n->port.empty()) return QBrush(badgeColour(n->kind));
      return {};
    case PortRole:
      return QString::fromStdString(n->port);
    case ShardKindRole:
      return QString::fromStdString(n->port.empty() ? "" : n->kind);
    case ModulePathRole:
      return QString::fromStdString(n->module);
    case LayerRole:
      return n->layer;
    default:
      return {};
  }
}

QVariant ModuleTreeModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case NameColumn:
      return tr("Module / port");
    case ShapeColumn:
      return tr("Shape (whole)");
    case KindColumn:
      return tr("Shard / class");
    default:
      return {};
  }
}

}  // namespace shardscope::ui
