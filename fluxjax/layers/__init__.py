from .embedding_bag import EmbeddingBag as EmbeddingBag
