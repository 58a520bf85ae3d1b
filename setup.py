"""nplmtk: neural probabilistic language models in the style of SRILM.

The Cython kernels in cython_ext/ compile to nplmtk._ext.*, with -O3 and OpenMP; BLAS
comes from scipy.linalg.cython_blas, so no system BLAS is needed.
"""
import glob
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

# The networks' softmax needs a vectorised expf (glibc's libmvec, enabled by fast-math);
# the text, ARPA, back-off and checksum kernels must keep exact IEEE semantics.
# Every other .pyx is a network's kernel: a new architecture's file needs no line here.
TEXT_KERNELS = ("corpus_kernels", "arpa_format", "arpa_parse", "backoff_kernels", "count_kernels", "ngram_sorting",
                "text_kernels", "checksum_kernels", "lattice_kernels", "lattice_nbest", "htk_reader", "lattice_graph",
                "lattice_write", "ngram_fast_score", "estimate_kernels")
KERNELS = sorted(os.path.basename(path)[:-len(".pyx")] for path in glob.glob("cython_ext/*.pyx"))
FAST_MATH = set(KERNELS) - set(TEXT_KERNELS)


def kernel(name):
    return Extension(
        f"nplmtk._ext.{name}", [f"cython_ext/{name}.pyx"],
        include_dirs=[numpy.get_include(), "cython_ext"],
        extra_compile_args=["-O3", "-fopenmp"]
        + (["-ffast-math"] if name in FAST_MATH else ["-ffp-contract=off"]),  # no fused a * b + c either
        extra_link_args=["-fopenmp", "-lm"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )

setup(
    name="nplmtk",
    version="0.1.0",
    description="Neural probabilistic language models and n-grams, SRILM-style tools",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=["nplmtk", "nplmtk._ext", "nplmtk.io", "nplmtk.neural", "nplmtk.ngram", "nplmtk.ngram.stream",
              "nplmtk.lattice", "nplmtk.integrations", "nplmtk.cli"],
    package_dir={"nplmtk.cli": "cli"},
    ext_modules=cythonize(
        [kernel(name) for name in KERNELS],
        # cython_ext: the inline .pxd files (kernel_common, feedforward); ".": the C
        # interfaces of compiled modules, beside them in nplmtk/_ext (sampling_kernels.pxd)
        include_path=["cython_ext", "."],
        compiler_directives={"language_level": 3, "boundscheck": False,
                             "wraparound": False, "cdivision": True},
    ),
    install_requires=["click>=8.1", "numpy>=1.24", "scipy>=1.11", "tqdm>=4.60"],
    extras_require={
        "mpi": ["mpi4py>=3.1", "mpich"],
        "test": ["pytest>=7", "pytest-xdist>=3", "kenlm", "gensim>=4.3", "hypothesis>=6"],
        "fuzz": ["hypothesis>=6"],
        "plot": ["matplotlib>=3.5"],
        "decode": ["pyctcdecode>=0.5"],  # nplmtk.integrations.pyctcdecode
        # nplmtk.integrations.torchaudio: CTCDecoderLM and flashlight-text's decoder (torchaudio
        # >= 2.1; tested with 2.9.1), not in "test": torch is several GB
        "decode-torchaudio": ["torchaudio>=2.1", "flashlight-text"],
    },
    entry_points={"console_scripts": ["nplm = nplmtk.cli.main:main"]},
    options={"build_ext": {"parallel": os.cpu_count()}},  # the kernels compile side by side
    zip_safe=False,
)
