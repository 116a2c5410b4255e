# Databricks notebook source
# MAGIC %md
# MAGIC # Authentication from a secret scope
# MAGIC
# MAGIC Credentials belong in a Databricks **secret scope**, never in a notebook. This notebook
# MAGIC reads them with `dbutils.secrets.get` and, outside Databricks (or when the scope lacks
# MAGIC the key), from environment variables:
# MAGIC
# MAGIC | what | secret (scope from the `secret_scope` widget, default `pulsar`) | environment |
# MAGIC |---|---|---|
# MAGIC | a JWT | `token` | `PULSAR_AUTH_TOKEN` |
# MAGIC | other plugins' parameters (basic, TLS, OAuth2) | `auth-params` | `PULSAR_AUTH_PARAMS` |
# MAGIC | the plugin for `auth-params` (not secret) | widget `auth_plugin` | `PULSAR_AUTH_PLUGIN` |
# MAGIC | CA bundle path (`pulsar+ssl://`) | widget `tls_trust_certs` | `PULSAR_TLS_TRUST_CERTS` |
# MAGIC
# MAGIC Create the scope once with the Databricks CLI: `databricks secrets create-scope pulsar`,
# MAGIC then `databricks secrets put-secret pulsar token`. With no credentials anywhere the
# MAGIC notebook connects without authentication (pulsar-lite, a local standalone broker).
# MAGIC The connector never puts credentials in error messages or reprs, and Databricks redacts
# MAGIC secret values in cell output.

# COMMAND ----------

# MAGIC %pip install pulsar-spark

# COMMAND ----------

# Setup: the service URL (widget on Databricks, PULSAR_SERVICE_URL elsewhere), a Spark
# session (Databricks' own, or a local one). Installing the package gives the "pulsar"
# format: nothing to register.
import contextlib
import os
import sys
import uuid

from pyspark.sql import functions as F

try:
    dbutils  # noqa: B018  (Databricks defines dbutils and spark)
except NameError:
    dbutils = None

DEFAULT_URL = os.environ.get("PULSAR_SERVICE_URL", "pulsar://localhost:6650")
if dbutils is not None:
    dbutils.widgets.text("service_url", DEFAULT_URL, "Pulsar service URL")
    SERVICE_URL = dbutils.widgets.get("service_url")
else:
    SERVICE_URL = DEFAULT_URL

try:
    spark  # noqa: B018
except NameError:
    # Spark's Python workers must run this interpreter: it has pyarrow and pulsar_spark.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
        .appName("pulsar-spark-notebook")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")

if tuple(int(part) for part in spark.version.split(".")[:2]) < (4, 1):
    # Spark 4.0 (Databricks Runtime 17.x) does not find the "pulsar" format by itself.
    from pulsar_spark import PulsarDataSource

    spark.dataSource.register(PulsarDataSource)
RUN = uuid.uuid4().hex[:8]  # topics of this run: reruns never see each other's data
print(f"Pulsar at {SERVICE_URL}; Spark {spark.version}; run {RUN}")
# COMMAND ----------


def setting(widget: str, env: str, label: str) -> str:
    """A non-secret setting: a widget on Databricks (defaulting to the environment)."""
    default = os.environ.get(env, "")
    if dbutils is None:
        return default
    dbutils.widgets.text(widget, default, label)
    return dbutils.widgets.get(widget)


SCOPE = setting("secret_scope", "PULSAR_SECRET_SCOPE", "Secret scope") or "pulsar"


def secret(key: str, env: str) -> tuple[str | None, str]:
    """(value, where it came from): the secret scope first, then the environment."""
    if dbutils is not None:
        with contextlib.suppress(Exception):  # no such scope or key: try the environment
            return dbutils.secrets.get(scope=SCOPE, key=key), f"secret {SCOPE}/{key}"
    value = os.environ.get(env)
    return (value, f"environment {env}") if value else (None, "")


token, token_source = secret("token", "PULSAR_AUTH_TOKEN")
params, params_source = secret("auth-params", "PULSAR_AUTH_PARAMS")
plugin = setting("auth_plugin", "PULSAR_AUTH_PLUGIN", "Auth plugin (with auth-params)")
ca_file = setting("tls_trust_certs", "PULSAR_TLS_TRUST_CERTS", "CA bundle path (pulsar+ssl)")

AUTH: dict[str, str] = {}
if token:
    AUTH["authPluginClassName"] = "token"
    AUTH["authParams"] = f"token:{token}"
    how = f"token auth, the token from {token_source}"
elif params:
    if not plugin:
        msg = f"auth parameters from {params_source} need a plugin (PULSAR_AUTH_PLUGIN)"
        raise ValueError(msg)
    AUTH["authPluginClassName"] = plugin
    AUTH["authParams"] = params
    how = f"{plugin} auth, the parameters from {params_source}"
else:
    how = "no authentication (no credentials in the secret scope or the environment)"
if ca_file:
    AUTH["tlsTrustCertsFilePath"] = ca_file
    how += f", TLS trusting {ca_file}"
print(f"connecting to {SERVICE_URL} with {how}")
print("options:", {k: ("<redacted>" if k == "authParams" else v) for k, v in AUTH.items()})

# COMMAND ----------

# MAGIC %md
# MAGIC ## Write and read with the credentials
# MAGIC
# MAGIC The same options go to every read and write: `.options(**AUTH)`.

# COMMAND ----------

TOPIC = f"persistent://public/default/secured-{RUN}"
(
    spark.range(100)
    .select(
        F.format_string("device-%d", F.col("id") % 10).alias("key"),
        F.to_json(F.struct("id", (F.col("id") * 0.5).alias("reading"))).alias("value"),
    )
    .write.format("pulsar")
    .option("service.url", SERVICE_URL)
    .options(**AUTH)
    .option("topic", TOPIC)
    .mode("append")
    .save()
)
back = (
    spark.read.format("pulsar")
    .option("service.url", SERVICE_URL)
    .options(**AUTH)
    .option("topic", TOPIC)
    .load()
)
back.groupBy(F.col("key").cast("string").alias("device")).count().orderBy("device").show(3)
count = back.count()

# COMMAND ----------

if count != 100:
    msg = f"expected 100 messages in {TOPIC}, read {count}"
    raise AssertionError(msg)
print(f"04_auth: OK, 100 messages written and read back with {how}")
