"""The field types the stack configuration models share: names, CIDRs, zones, tag keys and values, Azure names and
image references, each with its length limit and its check (:mod:`gb300.config.checks`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from gb300.config.checks import check_cidr, check_name, check_pool_name, check_tag_key, zone_to_str
from gb300.config.text import text_limit

Name = Annotated[str, Field(min_length=1, max_length=12), AfterValidator(check_name)]
PoolName = Annotated[str, Field(min_length=1, max_length=10), AfterValidator(check_pool_name)]
Cidr = Annotated[str, Field(max_length=len("255.255.255.255/32")), BeforeValidator(check_cidr)]
UserName = Annotated[str, Field(max_length=32)]  # Linux's LOGIN_NAME_MAX less the NUL; the checks hold the form
Zone = Annotated[Literal["1", "2", "3"], BeforeValidator(zone_to_str)]
TagKey = Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[^<>%&\\?/]+$"), AfterValidator(check_tag_key)]
TagValue = Annotated[str, Field(max_length=256)]
AzureName = Annotated[str, Field(max_length=text_limit("azureName"))]
ImageReference = Annotated[str, Field(max_length=text_limit("imageReference"))]
