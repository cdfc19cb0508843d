# The Flux script that examples/porting_guide.py ports line by line (Flux 0.14+ / 0.16, explicit style).
# Data: x_train (8×8×1×N Float32, WHCN) and y_train (10×N one-hot), as porting_guide.py builds them from
# scikit-learn's digits; in Julia they would come from MLDatasets or a file.

using Flux, Statistics, Random, JLD2
using Flux: onehotbatch, onecold, logitcrossentropy, DataLoader

Random.seed!(0)
epochs = 12

# x_train, y_train, x_test, y_test = ...        8×8×1×N Float32, onehotbatch(labels, 0:9)

model = Chain(
    Conv((3, 3), 1 => 8; pad=1),
    BatchNorm(8, relu),
    MaxPool((2, 2)),
    Flux.flatten,
    Dense(128 => 32, relu),
    Dropout(0.3),
    Dense(32 => 10),
)
@assert size(model(x_train[:, :, :, 1:2])) == (10, 2)
@assert size(model[1].weight) == (3, 3, 1, 8)

loss(m, x, y) = logitcrossentropy(m(x), y)
accuracy(m, x, y) = mean(onecold(m(x)) .== onecold(y))

loader = DataLoader((x_train, y_train), batchsize=64, shuffle=true)
opt_state = Flux.setup(Adam(3e-3), model)

for epoch in 1:epochs
    for (x, y) in loader
        l, gs = Flux.withgradient(m -> loss(m, x, y), model)
        Flux.update!(opt_state, model, gs[1])
    end
    testmode!(model)
    @info "epoch" epoch acc = accuracy(model, x_test, y_test)
    testmode!(model, :auto)
end

# the structural gradient: one entry per field, `nothing` where there is none
gs = gradient(m -> loss(m, x_test, y_test), model)
@assert size(gs[1].layers[1].weight) == (3, 3, 1, 8)
@assert gs[1].layers[3] === nothing               # MaxPool has no parameters
@assert !iszero(model[2].μ)                       # BatchNorm's running mean moved during training

# fine-tune with a smaller step, the convolution frozen
Flux.adjust!(opt_state, 1e-4)
Flux.freeze!(opt_state.layers[1])
w = copy(model[1].weight)
Flux.train!(loss, model, loader, opt_state)
@assert model[1].weight == w
Flux.thaw!(opt_state.layers[1])

# save and load the weights
jldsave("model.jld2"; model_state = Flux.state(model))
model2 = Chain(Conv((3, 3), 1 => 8; pad=1), BatchNorm(8, relu), MaxPool((2, 2)), Flux.flatten,
               Dense(128 => 32, relu), Dropout(0.3), Dense(32 => 10))
Flux.loadmodel!(model2, JLD2.load("model.jld2", "model_state"))
testmode!(model); testmode!(model2)
@assert model2(x_test) ≈ model(x_test)
println("final test accuracy: ", accuracy(model, x_test, y_test))
