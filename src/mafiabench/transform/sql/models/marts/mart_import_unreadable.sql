with unreadable as (
    select * from {{ ref('stg_import_unreadable') }}
),

final as (
    select
        source,
        path,
        file,
        reason,
        imported_at
    from unreadable
    order by source, path, file
)

select * from final
