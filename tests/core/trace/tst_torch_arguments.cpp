// Torch functions and tensor methods in trace scripts take PyTorch's names for their arguments,
// with PyTorch's meaning (dims, dtypes, devices, corrections, elementwise max, `is` on dtypes);
// the arguments they refuse are tst_trace's errorsNameTheLineAndTheNextJobWorks rows.
#include <QtTest/QtTest>

#include <string>
#include <vector>

#include "common/script_checks.h"
#include "common/test_support.h"
#include "core/engine/engine_types.h"
#include "core/trace/script_runner.h"

using namespace shardscope;
using namespace shardscope::test;

class TestTorchArguments : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // The keywords torch functions and tensor methods take are PyTorch's names for them, with
  // PyTorch's meaning (those refused: errorsNameTheLineAndTheNextJobWorks).
  void torchArgumentsMeanWhatTheyMeanInPyTorch_data() {
    QTest::addColumn<QString>("expression");
    QTest::addColumn<QString>("printed");
    // An int exponent keeps an int tensor int, as torch's Python number does (it gave floats).
    QTest::newRow("pow keeps ints") << "torch.arange(4).pow(2)"
                                    << "tensor([0, 1, 4, 9])";
    QTest::newRow("pow of a tensor exponent")
        << "torch.arange(4).pow(torch.tensor([1, 2, 1, 2])).tolist()"
        << "[0, 1, 2, 9]";
    QTest::newRow("torch.pow") << "torch.pow(torch.arange(4), 3).tolist()"
                               << "[0, 1, 8, 27]";
    // torch functions of tensor methods that take a shape dimension by dimension or as a tuple.
    QTest::newRow("torch.reshape") << "torch.reshape(torch.arange(6), (3, 2)).shape"
                                   << "torch.Size([3, 2])";
    QTest::newRow("torch.permute") << "torch.permute(torch.ones(2, 3, 4), (2, 0, 1)).shape"
                                   << "torch.Size([4, 2, 3])";
    QTest::newRow("torch.flip") << "torch.flip(torch.arange(3), (0,)).tolist()"
                                << "[2, 1, 0]";
    QTest::newRow("torch.flatten start_dim") << "torch.flatten(torch.ones(2, 3, 4), 1).shape"
                                             << "torch.Size([2, 12])";
    QTest::newRow("torch.transpose") << "torch.transpose(torch.ones(2, 3), 0, 1).shape"
                                     << "torch.Size([3, 2])";
    QTest::newRow("torch.squeeze and unsqueeze")
        << "torch.squeeze(torch.unsqueeze(torch.ones(2), 0), dim=0).shape"
        << "torch.Size([2])";
    QTest::newRow("torch.narrow and chunk")
        << "torch.chunk(torch.narrow(torch.arange(6), 0, 1, 4), 2)"
        << "(tensor([1, 2]), tensor([3, 4]))";
    QTest::newRow("torch.any all numel round")
        << "(torch.any(torch.arange(3) > 1), torch.all(torch.arange(3) > 1), "
           "torch.numel(torch.ones(2, 3)), torch.round(torch.tensor([0.5, 1.5])).tolist())"
        << "(tensor(True), tensor(False), 6, [0.0, 2.0])";
    // norm's first argument is p: x.norm(1) summed along dim 1 instead (the 2-norm of each row).
    QTest::newRow("norm p by position") << "torch.arange(6).reshape(2, 3).float().norm(1)"
                                        << "tensor(15.)";
    QTest::newRow("norm p and dim by position")
        << "torch.arange(6).reshape(2, 3).float().norm(1, 1).tolist()"
        << "[3.0, 12.0]";
    QTest::newRow("torch.norm p") << "torch.norm(torch.tensor([3.0, -4.0]), 1)"
                                  << "tensor(7.)";
    // A bool index is torch's (a new dim of one or no entries), not row 1 or row 0.
    QTest::newRow("index True") << "torch.arange(6).reshape(2, 3)[True].shape"
                                << "torch.Size([1, 2, 3])";
    QTest::newRow("index False") << "torch.arange(6).reshape(2, 3)[False].shape"
                                 << "torch.Size([0, 2, 3])";
    QTest::newRow("round decimals") << "torch.tensor([1.234567, 1234.5]).round(decimals=2).tolist()"
                                    << "[1.2300000190734863, 1234.5]";
    QTest::newRow("torch.round decimals")
        << "torch.round(torch.tensor([1234.5]), decimals=-2).tolist()"
        << "[1200.0]";
    // torch.Size is a tuple of ints that stays a Size where it leads, as torch's.
    QTest::newRow("Size joins a tuple") << "torch.ones(2, 3).shape + (1,)"
                                        << "torch.Size([2, 3, 1])";
    QTest::newRow("tuple joins a Size") << "(1,) + torch.ones(2, 3).shape"
                                        << "(1, 2, 3)";
    QTest::newRow("Size repeated") << "(torch.ones(2).shape * 2, 2 * torch.ones(3).shape)"
                                   << "(torch.Size([2, 2]), torch.Size([3, 3]))";
    QTest::newRow("Size numel") << "(torch.ones(2, 3).shape.numel(), torch.ones(()).shape.numel())"
                                << "(6, 1)";
    // A tensor equals no list (Python's fallback: torch has no answer), as in torch.
    QTest::newRow("tensor == list") << "(torch.tensor([1, 2]) == [1, 2], torch.ones(1) != (1,))"
                                    << "(False, True)";
    // A 0-d tensor formats as its element, as torch's Tensor.__format__ does.
    QTest::newRow("f-string of 0-d tensors")
        << "f'{torch.tensor(0.1)}|{torch.tensor(5)}|{torch.tensor(True)}|{torch.tensor(0.5):.2f}'"
        << "0.10000000149011612|5|True|0.50";
    QTest::newRow("int8 and int16")
        << "(torch.tensor([1, -1], dtype=torch.int8), torch.ones(1, dtype=torch.short).dtype)"
        << "(tensor([ 1, -1], dtype=torch.int8), torch.int16)";
    // `in` on a tensor is torch's __contains__; a list's search compares a tensor by its `==`, as
    // Python does (a list holding tensor(2) did not contain another tensor(2), nor 2).
    QTest::newRow("in a tensor")
        << "(2 in torch.tensor([1, 2]), 5 in torch.arange(3), "
           "torch.tensor(1) in torch.arange(3), 2.0 not in torch.arange(3))"
        << "(True, False, True, False)";
    QTest::newRow("tensor in a list")
        << "(torch.tensor(2) in [torch.tensor(1), torch.tensor(2)], 2 in [torch.tensor(2)], "
           "[torch.tensor(1), 3].index(3), [torch.tensor(1), torch.tensor(1)].count(1))"
        << "(True, True, 1, 2)";
    // Inside containers a tensor compares by its `==` too (dict keys stay by identity: a tensor
    // hashes by its id).
    QTest::newRow("tensors inside containers")
        << "([torch.tensor(1)] == [torch.tensor(1)], (torch.tensor(1), 2) in "
           "[(torch.tensor(1), 2)], torch.tensor(1) in {'k': torch.tensor(1)}.values(), "
           "torch.tensor(1) in {torch.tensor(1): 0}, [torch.tensor(1)] < [torch.tensor(2)])"
        << "(True, True, True, False, tensor(True))";
    // A sequence repeats by an integer tensor of one element, or a bool, as by an int.
    QTest::newRow("repeat by a tensor or a bool")
        << "([1, 2] * torch.tensor(2), torch.tensor(2) * 'ab', torch.ones(2).shape * True, [1] * "
           "False)"
        << "([1, 2, 1, 2], 'abab', torch.Size([2]), [])";
    // The shape methods' keywords, as torch names them.
    QTest::newRow("shape keywords")
        << "(torch.flip(torch.arange(3), dims=[0]).tolist(), torch.ones(2, 3).permute(dims=(1, "
           "0)).shape, torch.ones(6).reshape(shape=(2, 3)).shape, torch.ones(6).view(size=(3, "
           "2)).shape)"
        << "([2, 1, 0], torch.Size([3, 2]), torch.Size([2, 3]), torch.Size([3, 2]))";
    QTest::newRow("sum dim keepdim") << "torch.ones(2, 3).sum(dim=1, keepdim=True).shape"
                                     << "torch.Size([2, 1])";
    QTest::newRow("sum over a tuple of dims") << "torch.ones(2, 3, 4).sum((0, 2)).tolist()"
                                              << "[8.0, 8.0, 8.0]";
    QTest::newRow("sum dtype") << "torch.ones(2, dtype=torch.int32).sum(dtype=torch.float64).dtype"
                               << "torch.float64";
    QTest::newRow("mean keepdim over all") << "torch.ones(2, 3).mean(keepdim=True).shape"
                                           << "torch.Size([1, 1])";
    QTest::newRow("torch.softmax dim") << "torch.softmax(torch.zeros(2, 4), dim=0).tolist()"
                                       << "[[0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]";
    QTest::newRow("functional softmax input")
        << "torch.nn.functional.softmax(input=torch.zeros(4), dim=0).tolist()"
        << "[0.25, 0.25, 0.25, 0.25]";
    QTest::newRow("softmax dtype") << "torch.zeros(2).softmax(0, dtype=torch.float64).dtype"
                                   << "torch.float64";
    QTest::newRow("zeros dtype") << "torch.zeros(3, dtype=torch.float16).dtype"
                                 << "torch.float16";
    QTest::newRow("zeros size") << "torch.zeros(size=(2, 3)).shape"
                                << "torch.Size([2, 3])";
    QTest::newRow("zeros_like dtype") << "torch.zeros_like(torch.ones(2), dtype=torch.int64).dtype"
                                      << "torch.int64";
    QTest::newRow("topk largest") << "torch.topk(torch.tensor([3, 1, 2]), 2, largest=False)[0]"
                                     ".tolist()"
                                  << "[1, 2]";
    QTest::newRow("topk by keyword") << "torch.tensor([3, 1, 2]).topk(k=1, dim=0)[1].tolist()"
                                     << "[0]";
    QTest::newRow("argmax dim None") << "torch.tensor([[1, 5], [7, 2]]).argmax(dim=None).item()"
                                     << "2";
    QTest::newRow("argmax keepdim")
        << "torch.argmax(torch.tensor([[1, 5], [7, 2]]), dim=1, keepdim=True).tolist()"
        << "[[1], [0]]";
    QTest::newRow("max dim") << "torch.tensor([[1, 5], [7, 2]]).max(dim=0)[0].tolist()"
                             << "[7, 5]";
    QTest::newRow("sort descending by position") << "torch.tensor([2, 3, 1]).sort(0, True)[0]"
                                                    ".tolist()"
                                                 << "[3, 2, 1]";
    QTest::newRow("norm p dim") << "torch.tensor([[3.0, 4.0]]).norm(p=2, dim=1).tolist()"
                                << "[5.0]";
    QTest::newRow("torch.norm dim")
        << "torch.norm(torch.tensor([[3.0, 4.0], [6.0, 8.0]]), dim=1).tolist()"
        << "[5.0, 10.0]";
    QTest::newRow("std unbiased") << "torch.tensor([1.0, 3.0]).std(unbiased=False).item()"
                                  << "1.0";
    QTest::newRow("std correction 0") << "torch.tensor([1.0, 3.0]).std(correction=0).item()"
                                      << "1.0";
    QTest::newRow("var correction 1")
        << "torch.var(torch.tensor([1.0, 2.0, 3.0, 4.0]), correction=1)"
           ".item()"
        << "1.6666666269302368";
    // Divided by N - correction = 2: 5 / 2.
    QTest::newRow("var correction 2")
        << "torch.tensor([1.0, 2.0, 3.0, 4.0]).var(correction=2).item()"
        << "2.5";
    QTest::newRow("var dim correction 2")
        << "torch.tensor([[1.0, 2.0, 4.0], [0.0, 0.0, 3.0]]).var(1, correction=2).tolist()"
        << "[4.666666507720947, 6.0]";  // (14 / 3) / (3 - 2), as ATen rounds it
    QTest::newRow("std correction past N") << "torch.tensor([1.0, 2.0]).std(correction=2).item()"
                                           << "inf";
    QTest::newRow("allclose atol")
        << "torch.allclose(torch.zeros(2), torch.ones(2) * 0.01, atol=0.1)"
        << "True";
    QTest::newRow("allclose equal_nan")
        << "torch.allclose(torch.tensor([float('nan')]), torch.tensor([float('nan')]), "
           "equal_nan=True)"
        << "True";
    QTest::newRow("cat dim") << "torch.cat([torch.zeros(1, 2), torch.ones(1, 2)], dim=1).shape"
                             << "torch.Size([1, 4])";
    QTest::newRow("arange step") << "torch.arange(0, 10, 3).tolist()"
                                 << "[0, 3, 6, 9]";
    QTest::newRow("arange dtype") << "torch.arange(3, dtype=torch.float32).tolist()"
                                  << "[0.0, 1.0, 2.0]";
    QTest::newRow("any dim") << "torch.tensor([[True, False], [False, False]]).any(dim=1).tolist()"
                             << "[True, False]";
    QTest::newRow("flatten start_dim") << "torch.zeros(2, 3, 4).flatten(start_dim=1).shape"
                                       << "torch.Size([2, 12])";
    QTest::newRow("squeeze dim None") << "torch.zeros(1, 2, 1).squeeze(dim=None).shape"
                                      << "torch.Size([2])";
    QTest::newRow("to dtype keyword") << "torch.zeros(2).to(dtype=torch.bfloat16).dtype"
                                      << "torch.bfloat16";
    QTest::newRow("to device and dtype") << "torch.zeros(2).to('cpu', dtype=torch.float16).dtype"
                                         << "torch.float16";
    QTest::newRow("zeros device") << "torch.zeros(2, device='cpu').device"
                                  << "cpu";
    QTest::newRow("ones_like device") << "torch.ones_like(torch.zeros(2), device='cpu').tolist()"
                                      << "[1.0, 1.0]";
    QTest::newRow("arange device") << "torch.arange(3, device='cpu').tolist()"
                                   << "[0, 1, 2]";
    QTest::newRow("tensor device") << "torch.tensor([1, 2], device='cpu').device"
                                   << "cpu";
    QTest::newRow("where of a condition alone")
        << "torch.where(torch.tensor([[True, False], [False, True]]))"
        << "(tensor([0, 1]), tensor([0, 1]))";
    QTest::newRow("nonzero as a tuple") << "torch.tensor([0, 3, 0, 5]).nonzero(as_tuple=True)"
                                        << "(tensor([1, 3]),)";
    QTest::newRow("torch.reshape with its shape whole")
        << "torch.reshape(torch.arange(6), (2, 3)).shape, torch.permute(torch.zeros(2, 3), "
           "dims=(1, 0)).shape"
        << "torch.Size([2, 3]) torch.Size([3, 2])";
    // A tensor's .device is a torch.device, as in torch: its type and index, its repr, equal to a
    // device of the same name and not to the string (torch.device('cpu') == 'cpu' is False).
    QTest::newRow("device type and index")
        << "torch.zeros(2).device.type, torch.zeros(2).device.index"
        << "cpu None";
    QTest::newRow("device repr") << "[torch.zeros(2).device, torch.device('cuda', 1)]"
                                 << "[device(type='cpu'), device(type='cuda', index=1)]";
    QTest::newRow("device of a name with an index") << "torch.device('cuda:3').index"
                                                    << "3";
    QTest::newRow("device equality")
        << "torch.zeros(2).device == torch.device('cpu'), torch.zeros(2).device == 'cpu'"
        << "True False";
    QTest::newRow("device in a list")
        << "torch.zeros(2).device in [torch.device('cpu')], torch.device('cpu') in ['cpu']"
        << "True False";
    QTest::newRow("device as a dict key") << "{torch.zeros(1).device: 5}[torch.device('cpu')]"
                                          << "5";
    QTest::newRow("to a tensor's device") << "torch.zeros(2).to(torch.ones(1).device).tolist()"
                                          << "[0.0, 0.0]";
    QTest::newRow("device with a cpu index")
        << "torch.zeros(1, device=torch.device('cpu', 0)).device, "
           "torch.zeros(1, device='cpu:0').device"
        << "cpu cpu";
    QTest::newRow("device of an int") << "torch.device(1)"
                                      << "cuda:1";
    QTest::newRow("device= a tensor's device")
        << "torch.zeros(2, device=torch.ones(1).device).device, f'{torch.device(\"cpu\")}'"
        << "cpu cpu";
    // dtypes are one object each in torch (torch.float is torch.float32): `is` compares them.
    QTest::newRow("dtype is") << "torch.zeros(2, dtype=torch.float16).dtype is torch.float16"
                              << "True";
    QTest::newRow("dtype is an alias") << "torch.zeros(2).dtype is torch.float"
                                       << "True";
    QTest::newRow("dtype is not") << "torch.zeros(2).dtype is not torch.float16"
                                  << "True";
    QTest::newRow("torch.max of two tensors")
        << "torch.max(torch.tensor([1.0, 5.0]), torch.tensor([3.0, 2.0])).tolist()"
        << "[3.0, 5.0]";
    QTest::newRow("min other") << "torch.tensor([1, 5]).min(other=torch.tensor([3, 2])).tolist()"
                               << "[1, 2]";
    QTest::newRow("to dtype positional") << "torch.zeros(2).to(torch.float64).dtype"
                                         << "torch.float64";
    QTest::newRow("matmul other") << "torch.ones(2, 3).matmul(other=torch.ones(3)).tolist()"
                                  << "[3.0, 3.0]";
    QTest::newRow("einsum of a list")
        << "torch.einsum('ij,jk->ik', [torch.ones(2, 3), torch.ones(3, 4)]).shape"
        << "torch.Size([2, 4])";
  }
  void torchArgumentsMeanWhatTheyMeanInPyTorch() {
    QFETCH(QString, expression);
    QFETCH(QString, printed);
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines);
    const std::string e = errorOf(*runner, "print(" + expression.toStdString() + ")\n");
    QCOMPARE(e, std::string("no error"));
    QCOMPARE(lines, std::vector<std::string>{printed.toStdString()});
  }

  // In a block, new tensors are made on the rank's device unless device= says 'cpu'; 'cuda' and
  // any 'cuda:N' name each rank's own GPU, so every rank answers alike (on the CPU both lines
  // read 'cpu' and a CUDA name is refused). VLLM(device=) takes a torch.device too.
  void deviceKeywordsMakeTensorsWhereTheySay() {
    const bool gpu = test::deviceKind() == DeviceKind::Cuda;
    std::vector<std::string> lines;
    auto runner = makeRunner(&lines, 2);
    const std::string e =
        errorOf(*runner, std::string("model = VLLM(\"demo\", device=torch.device('") +
                             (gpu ? "cuda" : "cpu") +
                             "'))\n"
                             "with model.trace(\"Hi\"):\n"
                             "    here = model.logits.device\n"
                             "    a = torch.zeros(2, device='cpu').device.save()\n"
                             "    b = torch.ones(2, device=here).device == here\n"
                             "    b = b.save()\n"
                             "    c = torch.arange(2).device == here\n"
                             "    c = c.save()\n"
                             "print(a, b, c)\n" +
                             std::string(gpu ? "with model.trace(\"Hi\"):\n"
                                               "    d = (torch.zeros(1, device='cuda:5').device == "
                                               "model.logits.device).save()\n"
                                               "print(d)\n"
                                             : ""));
    QCOMPARE(e, std::string("no error"));
    QCOMPARE(lines.front(), std::string("cpu True True"));
    if (gpu) QCOMPARE(lines.back(), std::string("True"));
  }
};

QTEST_GUILESS_MAIN(TestTorchArguments)
#include "tst_torch_arguments.moc"
