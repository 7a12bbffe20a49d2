"""Lightning places values by contract: a *_step method gets its batch on the
module's device, a callback's batch hooks get the step's outputs there."""
import torch
import torch.nn.functional as F
import lightning.pytorch as pl


class LitModel(pl.LightningModule):
    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        if acc > 0.99:  # expect: XFA402
            print("done")
        self.log("acc", acc)
        if batch_idx > 10:
            pass
        return loss

    def configure_optimizers(self):
        lr = 0.1
        if lr > 0:
            return torch.optim.SGD(self.parameters(), lr=lr)
        return None


class PrintCallback(pl.Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = outputs["loss"]
        if batch_idx % 50 == 0:
            print(f"step {trainer.global_step} loss {loss}")  # expect: XFA403
        if torch.isnan(loss):  # expect: XFA402
            trainer.should_stop = True

    def on_train_epoch_end(self, trainer, pl_module):
        metrics = trainer.callback_metrics
        print(metrics)  # gpu-first: XFA403 (the logged values: tensors, where the module made them)


class TypeCallback(pl.Callback):
    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        print(type(outputs).__name__, len(batch))
        name = getattr(outputs, "name", None)
        if name is not None:
            print(name)


from keras.callbacks import Callback as KerasCallback


class KerasPrinter(KerasCallback):
    def on_train_batch_end(self, batch, logs=None):
        print(f"batch {batch}")  # a Keras batch index: not Lightning's contract
